"""scripts/demo --once, end to end, as a newcomer runs it (issue #49): its own real Kafka 4.4.0
broker, the kproxy under test in front of it, the clean run, then the fault run
(scenarios/demo/lost-commit-answer.yaml applied through the admin API). Checked from the figures
the demo writes with --summary-json and from what it prints:

- the clean run: 10 transactions committed, 1000 records read back read_committed, no duplicate;
- the fault run: the rules fired (a lost EndTxn answer, a NOT_COORDINATOR answer), the client
  still committed exactly once (read_committed count = records committed, no duplicate), and
  kproxy's account of each of its transactions has the outcomes the client reported, in order,
  with the injected NOT_COORDINATOR named by its rule;
- afterwards `kproxy transactions` lists the clean run's ten committed transactions and the
  fault run's, and the summary line counts them.
"""

import json
import os
import subprocess

import kafka_harness as kh
from test_proxy_support import kproxy_binary

DEMO = kh.REPO_ROOT / "scripts" / "demo"


def test_demo_once_shows_the_fault_run_and_kproxys_account(tmp_path):
    summary_path = tmp_path / "demo-summary.json"
    env = {**os.environ, "KPROXY_BIN": kproxy_binary()}
    r = subprocess.run([str(DEMO), "--once", "--no-setup", "--no-build", "--any-ports", "--summary-json", str(summary_path)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900, env=env,
                       stdin=subprocess.DEVNULL, preexec_fn=kh._child_setup)
    out = r.stdout
    assert r.returncode == 0, out[-6000:]
    s = json.loads(summary_path.read_text())
    assert s["ok"] is True, s

    clean = s["clean"]
    assert clean["transactions_committed"] == 10 and clean["records_committed"] == 1000, clean
    assert clean["count"] == 1000 and clean["duplicates"] == 0, clean

    f = s["faults"]
    # What the client saw: it ran all ten transactions and kept its records exactly once.
    assert f["producer_ok"] is True, f
    assert len(f["client_outcomes"]) == 10, f
    assert f["count"] == f["records_committed"] and f["duplicates"] == 0 and f["consumer_ok"] is True, f
    # kproxy's account has the client's outcomes, transaction by transaction.
    assert f["account_outcomes"] == f["client_outcomes"], f
    # The coordinator-moved rule's NOT_COORDINATOR is in the account, named by its rule, as a retry.
    injected = [(e["api"], e["error"], e["injected_by"]) for errors in f["account_errors"] for e in errors]
    assert ("EndTxn", "NOT_COORDINATOR", "coordinator-moved") in injected, f["account_errors"]
    assert sum(f["account_retries"]) >= 1, f["account_retries"]
    # Both rules fired once (`kproxy ctl faults list`: NAME API ACTION TRIGGER HITS INJECTED).
    rows = {line.split()[0]: line.split() for line in f["fault_list"].splitlines()[1:] if line.strip()}
    assert rows["commit-answer-lost"][-1] == "1", f["fault_list"]
    assert rows["coordinator-moved"][-1] == "1", f["fault_list"]

    # After the demo, `kproxy transactions` lists both runs, with the counts by outcome.
    overview = s["final_overview"]
    ended = overview["ended"]
    clean_ones = [t for t in ended if t["transactional_id"] == "demo-producer"]
    fault_ones = [t for t in ended if t["transactional_id"] == "demo-producer-faults"]
    assert [t["outcome"] for t in clean_ones] == ["committed"] * 10, clean_ones
    assert [t["outcome"] for t in reversed(fault_ones)] == f["client_outcomes"], fault_ones
    committed = f["client_outcomes"].count("committed") + 10
    assert overview["outcomes"]["committed"] == committed, overview["outcomes"]
    listing = s["final_listing"]
    assert listing.count("demo-producer-faults") == len(fault_ones), listing
    assert listing.count("demo-producer ") == 10, listing
    assert "EndTxn:NOT_COORDINATOR (rule coordinator-moved)" in listing, listing
    assert f"Since start: {committed} committed" in listing, listing

    # What the demo prints: each part, and the command for the whole matrix.
    for part in ("== 1. A clean run", "== 2. The same workload with faults", "What the client saw:",
                 "The records (read_committed consumer):", "kproxy's account of each transaction",
                 "kproxy's outcomes equal the client's", "The fault rules and their hit counts",
                 "scripts/conformance --clients java-4.4", "measured here"):
        assert part in out, f"missing {part!r} in the demo's output:\n{out[-6000:]}"
