"""Issue #45: each class of the conformance verifier v2 is proven by a known-bad driver run end to end
through `scripts/conformance` and kproxy (the session's Kafka node via --bootstrap, the kproxy these
tests use), not only on hand-made reads:

- `--break split`: one transaction's records go out in two commits, reported as one: `not atomic`
  (TV2 and TV1; a key-only verifier reads it exact);
- `--break no-progress`: every transaction aborted after a bounded fault (06: EndTxn answered
  CONCURRENT_TRANSACTIONS twice), the driver never gives up: `no progress`, not exact;
- `--break retry-duplicate`: a record sent twice inside one transaction: `duplicates`, written inside
  the same commit;
- `--break offsets` (consume-transform-produce, on the baseline): each input's own offset committed
  instead of offset + 1: `wrong offsets` (under scenario 25's aborts the rewind to those offsets
  also writes an input twice: `duplicates + wrong offsets`);
- `--break read-uncommitted` (ctp, scenario 42: aborted transactions among the inputs, Fetch
  answers late, lost and closed): the outputs of aborted inputs are a `dirty read`;
- and the control: the same ctp cell with a correct driver is `exact`, with the group's offsets
  checked, and the observatory compared.

Each case is one runner invocation of one cell or two; the whole file stays within a few minutes.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from test_proxy_support import REPO_ROOT, kproxy_binary

RUN_TIMEOUT_S = 240


def run_matrix(tmp_path, kafka, scenarios, tv, driver_args="", workloads="producer", extra=()):
    kproxy = kproxy_binary()
    help_text = subprocess.run([kproxy, "--help"], capture_output=True, text=True, timeout=30)
    if "--scenario" not in help_text.stdout + help_text.stderr:
        pytest.xfail(f"{kproxy} has no --scenario option")
    out_md, out_json, work = tmp_path / "c.md", tmp_path / "c.json", tmp_path / "work"
    cmd = [str(REPO_ROOT / "scripts" / "conformance"), "--clients", "java-4.4", "--scenarios", scenarios, "--tv", tv,
           "--bootstrap", kafka.bootstrap(), "--nodes", "1", "--transactions", "4", "--records-per-txn", "6",
           "--cell-timeout", "60", "--jobs", "2", "--seed", "3", "--kproxy", kproxy, "--workloads", workloads,
           "--out", str(out_md), "--json", str(out_json), "--work-dir", str(work), *extra]
    if driver_args:
        cmd += ["--driver-args", driver_args]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=str(REPO_ROOT))
    log = f"$ {' '.join(cmd)}\nexit {r.returncode} after {time.monotonic() - t0:.0f}s\n{r.stdout[-5000:]}\n{r.stderr[-3000:]}"
    assert r.returncode == 0, log
    doc = json.loads(out_json.read_text())
    assert doc["cells"], log
    for c in doc["cells"]:
        assert c["kproxy_exit"] == 0 and c.get("verifier", {}).get("atomicity_checked"), (c.get("verifier"), log)
    return doc, out_md.read_text(), log


def test_split_transaction_is_not_atomic(kafka, tmp_path):
    doc, md, log = run_matrix(tmp_path, kafka, "00", "1,2", driver_args="--break split")
    assert len(doc["cells"]) == 2, log
    for c in doc["cells"]:
        v = c["verifier"]
        # Every key once, nothing dirty: only the commit units show the split.
        assert (v["missing_count"], v["duplicate_count"], v["dirty_count"]) == (0, 0, 0), v
        assert c["class"] == "not atomic" and not c["matches_expect"], (c["class"], v)
        assert v["not_atomic"] and v["not_atomic"][0].startswith("transaction 2: partition 0: 2 commits"), v
    assert "**not atomic**" in md


def test_abort_everything_is_no_progress(kafka, tmp_path):
    doc, md, log = run_matrix(tmp_path, kafka, "06", "1", driver_args="--break no-progress")
    (c,) = doc["cells"]
    assert c["faults_injected_total"] >= 1, c["faults"]
    assert c["account"]["committed_count"] == 0 and c["account"]["aborted_count"] == 4 and not c["account"]["gave_up"], c["account"]
    assert c["class"] == "no progress" and "0 of 4" in c["verifier"]["detail"], c["verifier"]
    # kproxy saw the aborts too.
    assert c["observatory"]["verdict"] == "agrees" and c["observatory"]["kproxy"].get("aborted", 0) >= 1, c["observatory"]


def test_retry_inside_one_transaction_is_a_duplicate(kafka, tmp_path):
    doc, md, log = run_matrix(tmp_path, kafka, "00", "2", driver_args="--break retry-duplicate")
    (c,) = doc["cells"]
    v = c["verifier"]
    assert c["class"] == "duplicates" and v["duplicate_count"] == 1 and v["duplicates"][0].endswith(":2:0"), v
    assert "inside the same transaction" in v["detail"], v
    # kproxy counted the extra record in that committed transaction.
    assert c["observatory"]["verdict"] == "differs" and "records" in c["observatory"]["difference"], c["observatory"]


def test_ctp_offsets_checked_and_off_by_one_caught(kafka, tmp_path):
    good, md, log = run_matrix(tmp_path / "good", kafka, "25", "2", workloads="ctp")
    (c,) = good["cells"]
    v = c["verifier"]
    assert c["workload"] == "ctp" and c["faults_injected_total"] >= 1, (c["faults"], log)
    assert c["class"] == "exact" and v["offsets_checked"] and v["inputs"] == 24, v
    assert "## Consume-transform-produce, transaction protocol 2" in md
    # On the baseline (no abort, so no rewind that would turn the bad offsets into a duplicate):
    # each input partition's last input has its output but is not committed as consumed.
    bad, md, log = run_matrix(tmp_path / "bad", kafka, "00", "2", workloads="ctp", driver_args="--break offsets")
    (c,) = bad["cells"]
    assert c["class"] == "wrong offsets" and c["verifier"]["offset_problems"], c["verifier"]
    assert c["verifier"]["duplicate_count"] == 0 and c["verifier"]["missing_count"] == 0, c["verifier"]


def test_read_committed_consumer_skips_aborted_inputs_and_a_read_uncommitted_one_is_caught(kafka, tmp_path):
    # Scenario 42: the input holds 3 aborted transactions between the committed ones; the driver's
    # read_committed consumer fetches through kproxy under late, lost and closed Fetch answers.
    good, md, log = run_matrix(tmp_path / "good", kafka, "42", "2", workloads="ctp")
    (c,) = good["cells"]
    v = c["verifier"]
    assert c["workload"] == "ctp" and c["faults_injected_total"] >= 1, (c["faults"], log)
    assert c["class"] == "exact" and v["offsets_checked"] and v["inputs"] == 48, v  # 8 x 6 committed
    assert v["aborted_inputs_out_count"] == 0, v
    assert {f["name"]: f["injected"] for f in c["faults"]}["fetch-late"] == 2, c["faults"]
    # The same cell with a consumer that reads uncommitted: it is given the aborted inputs and
    # writes their outputs, which the verifier calls a dirty read.
    bad, md, log = run_matrix(tmp_path / "bad", kafka, "42", "2", workloads="ctp", driver_args="--break read-uncommitted")
    (c,) = bad["cells"]
    v = c["verifier"]
    assert v["aborted_inputs_out_count"] >= 1 and ":ab:" in v["aborted_inputs_out"][0], v
    assert c["class"] == "dirty read" and not c["matches_expect"], (c["class"], v)
