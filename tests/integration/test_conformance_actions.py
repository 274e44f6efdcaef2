"""Scenario actions of the conformance runner (issue #45 item 3, conformance/README.md "Scenario
actions"): a second live instance of the transactional id (36-zombie-instance), the driver
killed and started again (37-producer-crash-restart), the coordinator's broker killed
(38-coordinator-broker-kill) and a written partition's leader killed (39-partition-leader-kill),
each at the seeded transaction whose EndTxn kproxy holds.

- the scenario checks refuse what an action cannot run with;
- the cell's class is composed from both instances as the README says (pure, no broker);
- end to end through scripts/conformance, a 3-node Kafka 4.4 cluster the runner starts and kproxy
  (the ASan build), with the Java 4.4 client on transaction.version 2: the action fired
  mid-transaction; the second instance ran its whole workload exact; the zombie's first instance
  stopped on PRODUCER_FENCED as documented; the killed instance's committed transactions are
  visible once and its held one is not; through a killed coordinator or partition leader the
  client finished exact and the runner restored the cluster; kproxy's history of the id agrees
  with the accounts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_proxy_support import REPO_ROOT, kproxy_binary

sys.path.insert(0, str(REPO_ROOT / "conformance" / "runner"))
import cell as cell_mod  # noqa: E402
import scenarios as scn  # noqa: E402

RUN_TIMEOUT_S = 300


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("workload, error", [
    ('{ action: reboot }', "workload.action must be one of"),
    ('{ action: zombie, action_at: "3-1" }', "action_at must be a transaction index or a range"),
    ('{ action: zombie, action_at: "1-4" }', "must leave the last transaction after the action"),
    ('{ action_at: "1-2" }', "action_at needs workload.action"),
])
def test_action_settings_are_checked(tmp_path, workload, error):
    p = _write(tmp_path, "40-bad-action", f"""scenario: 40-bad-action
version: 1
number: 4
description: "x"
protocols: [1, 2]
expect: exact
workload: {workload}
faults: []
""")
    with pytest.raises(scn.ScenarioError, match=error):
        scn.load(p)


def test_an_action_scenario_may_not_match_endtxn_itself(tmp_path):
    p = _write(tmp_path, "41-endtxn-too", """scenario: 41-endtxn-too
version: 1
number: 4
description: "x"
protocols: [2]
expect: exact
workload: { action: zombie }
faults:
  - name: every-request-slow
    match: {}
    action: { delay: "10ms" }
""")
    with pytest.raises(scn.ScenarioError, match="must not match EndTxn"):
        scn.load(p)


def test_the_moment_is_seeded_and_the_hold_rule_names_it():
    sc = scn.load(REPO_ROOT / "scenarios" / "36-zombie-instance.yaml")
    picks = {cell_mod.runner_action(sc, seed)["at_transaction"] for seed in range(1, 40)}
    assert picks == {1, 2, 3}  # the whole range of action_at, and nothing outside it
    a = cell_mod.runner_action(sc, 7)
    assert a == cell_mod.runner_action(sc, 7)  # the same seed, the same moment
    assert a["hold_rule"]["match"] == {"api": "EndTxn"}
    assert a["hold_rule"]["action"]["side"] == "request"
    assert a["hold_rule"]["trigger"] == {"after": a["at_transaction"], "times": 1}
    assert cell_mod.runner_action(scn.load(REPO_ROOT / "scenarios" / "00-baseline.yaml"), 7) is None


@pytest.mark.parametrize("kind, first, second, want", [
    ("zombie", "exact, gave up as documented", "exact", "exact, gave up as documented"),
    ("zombie", "exact, gave up as documented", "duplicates", "duplicates (new instance)"),
    ("zombie", "loss", "exact", "loss"),
    ("producer-crash-restart", "exact", "exact", "exact"),
    ("producer-crash-restart", "exact", "loss", "loss"),
    ("producer-crash-restart", "dirty read", "exact", "dirty read (killed instance)"),
])
def test_the_cell_class_comes_from_both_instances(kind, first, second, want):
    rec = {"class": first, "action": {"kind": kind, "second": {"class": second}}}
    assert cell_mod._with_second_instance(rec) == want
    assert cell_mod._with_second_instance({"class": first, "action": {"kind": kind, "fired": False}}) == first


def test_actions_end_to_end(tmp_path):
    kproxy = kproxy_binary()
    out_md, out_json, work = tmp_path / "c.md", tmp_path / "c.json", tmp_path / "work"
    cmd = [str(REPO_ROOT / "scripts" / "conformance"), "--clients", "java-4.4", "--scenarios", "36,37,38,39", "--tv", "2",
           "--nodes", "3", "--cell-timeout", "60", "--jobs", "2", "--seed", "3", "--kproxy", kproxy, "--tap",
           "--out", str(out_md), "--json", str(out_json), "--work-dir", str(work)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=str(REPO_ROOT))
    log = f"$ {' '.join(cmd)}\nexit {r.returncode} after {time.monotonic() - t0:.0f}s\n{r.stdout[-5000:]}\n{r.stderr[-2000:]}"
    assert r.returncode == 0, log
    cells = {c["scenario"]: c for c in json.loads(out_json.read_text())["cells"]}
    assert set(cells) == {"36-zombie-instance", "37-producer-crash-restart", "38-coordinator-broker-kill",
                          "39-partition-leader-kill"}, log
    for name, c in cells.items():
        act = c["action"]
        assert act["fired"], (name, act, c.get("faults"))
        k = act["at_transaction"]
        assert 1 <= k <= 3
        assert c["observatory"]["verdict"] == "agrees", (name, c["observatory"])
        held = [f for f in c["faults"] if f["name"] == "runner-hold-endtxn"]
        assert held and held[0]["injected"] == 1, (name, c["faults"])
        # --tap: every frame of the cell, as `kproxy tap --json` printed it.
        frames = [json.loads(line) for line in (Path(c["dir"]) / "tap.jsonl").read_text().splitlines() if line.startswith("{")]
        ends = [f for f in frames if f.get("api") == "EndTxn" and f.get("direction") == "request"]
        assert len(ends) >= c["transactions"], (name, len(ends))
        if name.startswith(("36", "37")):
            second = act["second"]
            assert second["class"] == "exact", (name, second)
            assert second["account"]["committed_count"] == c["transactions"], (name, second["account"])
        else:
            # The broker died under the client, which finished every transaction exact; the
            # runner brought the node back before the next cell.
            # The runner's cluster numbers its nodes from 1 (kafka_harness.KafkaCluster's
            # first_node_id), so a 3-node cluster has nodes 1, 2 and 3.
            assert act["killed_node"] in (1, 2, 3) and act["restore_s"] >= 0, act
            assert "second" not in act
            assert c["class"] == "exact" and c["account"]["committed_count"] == c["transactions"], (name, c["class"], c["account"])
    zombie = cells["36-zombie-instance"]
    assert zombie["class"] == "exact, gave up as documented", zombie
    assert zombie["account"]["committed_count"] == zombie["action"]["at_transaction"], zombie["account"]
    assert "PRODUCER_FENCED" in (zombie["account"]["errors"] or {}), zombie["account"]
    assert zombie["matches_expect"]
    crash = cells["37-producer-crash-restart"]
    assert crash["class"] == "exact", crash
    killed = json.loads((Path(crash["dir"]) / "killed-account.json").read_text())
    k = crash["action"]["at_transaction"]
    assert killed["committed"] == list(range(k)) and killed["aborted"] == [k], killed
    # The verifier read the killed instance's transaction k: none of it visible, the ones before once.
    assert crash["verifier"]["class"] == "exact" and crash["verifier"]["committed_expected"] == k * crash["records_per_txn"], crash["verifier"]
    assert crash["driver"]["exit"] not in (0, None), crash["driver"]  # it was killed, not finished
    assert crash["matches_expect"]
    # kproxy saw both instances under the one id: k + N committed, the held one ended by fencing.
    kp = crash["observatory"]["kproxy"]
    assert kp.get("committed") == k + crash["transactions"], kp
