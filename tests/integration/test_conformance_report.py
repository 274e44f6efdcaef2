"""The conformance runner's report parts that need no broker (issues #44, #45): the observatory
comparison (conformance/runner/observatory.py) on kproxy histories shaped like the ones the matrix
saw, and shards merged by --report-from into one report with the observatory column, the
"TV1 client" note, flaky cells and the time per cell."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from test_proxy_support import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "conformance" / "runner"))
import observatory  # noqa: E402


def txn(outcome, records=10, retries=0, groups=None):
    t = {"outcome": outcome, "records": records, "retries": retries, "producer_id": 7, "producer_epoch": 0}
    if groups is not None:
        t["groups"] = groups
    return t


def acc(c, a=0, u=0):
    return {"committed": list(range(c)), "aborted": list(range(c, c + a)), "unknown": list(range(c + a, c + a + u))}


def test_observatory_agrees_and_differs():
    ok = observatory.compare({"transactions": [txn("committed")] * 5}, acc(5), {"unknown_present": []}, 10, "producer")
    assert ok["verdict"] == "agrees" and ok["kproxy"] == {"committed": 5}, ok
    # Scenario 21 under transaction.version 1, as the matrix saw it: the EndTxn answer dropped, the
    # client's retried commit counted as a second, empty commit.
    double = [txn("committed"), txn("committed", records=0), txn("committed"), txn("committed"), txn("committed"),
              txn("committed")]
    d = observatory.compare({"transactions": double}, acc(5), {}, 10, "producer")
    assert d["verdict"] == "differs" and "committed: kproxy 6, client 5" in d["difference"], d
    assert "records [0]" in d["difference"], d
    # A retried Produce counts its records again (docs/transactions.md): not a difference.
    retried = observatory.compare({"transactions": [txn("committed", 13, 1)] + [txn("committed")] * 4}, acc(5), {}, 10, "producer")
    assert retried["verdict"] == "agrees", retried
    # A record more without a retry is one.
    extra = observatory.compare({"transactions": [txn("committed", 11)] + [txn("committed")] * 4}, acc(5), {}, 10, "producer")
    assert extra["verdict"] == "differs" and "records [11]" in extra["difference"], extra
    # kafkajs under scenario 31 (the matrix of 2026-12-06 night): the client re-sent records
    # inside one transaction; kproxy counts what the broker kept, and the report says the log
    # supports it. Without the verifier's duplicates, or with a total the log does not hold, no such note.
    dup_txns = [txn("committed"), txn("committed", 14), txn("committed"), txn("committed", 16), txn("committed")]
    dup = observatory.compare({"transactions": dup_txns}, acc(5), {"records_read": 60, "duplicate_count": 10}, 10, "producer")
    assert dup["verdict"] == "differs" and "records [14, 16]" in dup["difference"], dup
    assert "holds 60 records in the committed transactions, as kproxy counts" in dup["broker_log"], dup
    assert "10 it wrote twice" in dup["broker_log"], dup
    other = observatory.compare({"transactions": dup_txns}, acc(5), {"records_read": 58, "duplicate_count": 8}, 10, "producer")
    assert "broker_log" not in other, other
    plain = observatory.compare({"transactions": dup_txns}, acc(5), {"records_read": 60}, 10, "producer")
    assert "broker_log" not in plain, plain
    # kafka-python under scenarios 11, 17 and 19: the client counts a transaction committed whose
    # records the broker never kept (a loss); kproxy counted it aborted. The log supports kproxy.
    lost = observatory.compare({"transactions": [txn("aborted")] + [txn("committed")] * 4}, acc(5),
                               {"records_read": 40, "missing": [f"run:0:{i}" for i in range(10)]}, 10, "producer")
    assert lost["verdict"] == "differs" and "committed: kproxy 4, client 5" in lost["difference"], lost
    assert "no record of 1 transaction(s) the client counts committed; its 4 committed are kproxy's count" in lost["broker_log"], lost
    part = observatory.compare({"transactions": [txn("aborted")] + [txn("committed")] * 4}, acc(5),
                               {"records_read": 45, "missing": [f"run:0:{i}" for i in range(5)]}, 10, "producer")
    assert "broker_log" not in part, part  # half a transaction missing: not a whole transaction the log lacks
    # confluent-kafka-javascript under scenario 22: the client gave up in abort with no outcome
    # reported; its transaction is visible (a dirty read for the verifier), committed for kproxy.
    dirty = observatory.compare({"transactions": [txn("committed")]}, dict(acc(0), gave_up=True),
                                {"records_read": 10, "dirty": [f"run:0:{i}" for i in range(10)]}, 10, "producer")
    assert dirty["verdict"] == "differs" and "committed: kproxy 1, client 0" in dirty["difference"], dirty
    assert "shows 1 transaction(s) committed that the client did not report committed" in dirty["broker_log"], dirty
    # kafkajs under scenario 33 (blackhole): the client gave up at its deadline knowing no outcome;
    # kproxy shows the transactions ended by the coordinator and no commit, the log holds nothing.
    none = observatory.compare({"transactions": [txn("timed_out", 19), txn("fenced", 3)]}, dict(acc(0), gave_up=True),
                               {"records_read": 0}, 10, "producer")
    assert none["verdict"] == "differs" and "knew the outcome of none of its transactions" in none["broker_log"], none
    # The client gave up before EndTxn's answer: the broker's log decides which side it supports.
    unk = observatory.compare({"transactions": [txn("committed")] * 3}, acc(2, u=1), {"unknown_present": [2]}, 10, "producer")
    assert unk["verdict"] == "agrees" and "shows 1 of them committed, which supports kproxy's count" in unk["broker_log"], unk
    unk2 = observatory.compare({"transactions": [txn("committed")] * 3}, acc(2, u=1), {"unknown_present": []}, 10, "producer")
    assert unk2["verdict"] == "differs" and "supports neither" in unk2["broker_log"], unk2
    # A client that gave up leaving its transaction open: kproxy showing it open agrees.
    left = observatory.compare({"transactions": [txn("open")]}, dict(acc(0, u=1), gave_up=True), {"unknown_present": []}, 10, "producer")
    assert left["verdict"] == "agrees" and "left when it gave up" in left["note"], left
    # Franz-go under scenario 11 (transaction.version 2): one client abort that kproxy split into
    # a fenced transaction and an aborted one. One ended badly more than the client aborted is a
    # difference unless the client gave up (the transaction it left open, ended by the coordinator).
    split = observatory.compare({"transactions": [txn("fenced"), txn("aborted")] + [txn("committed")] * 4}, acc(4, a=1), {}, 10,
                                "producer")
    assert split["verdict"] == "differs" and "aborted/fenced/timed out: kproxy 2, client aborted 1" in split["difference"], split
    gave_up = observatory.compare({"transactions": [txn("aborted"), txn("timed_out")]}, dict(acc(0, a=1), gave_up=True), {}, 10,
                                  "producer")
    assert gave_up["verdict"] == "agrees", gave_up
    # --report-from of a zombie cell: both instances' accounts count, as when it ran.
    zombie = {"observatory": {"transactions": [txn("committed")] * 8 + [txn("fenced")]}, "records_per_txn": 10,
              "account": {"committed_count": 3, "aborted_count": 0, "unknown_count": 1, "gave_up": True},
              "action": {"kind": "zombie", "second": {"account": {"committed_count": 5, "aborted_count": 0, "unknown_count": 0}}}}
    observatory.recompare(zombie)
    assert zombie["observatory"]["verdict"] == "agrees", zombie["observatory"]
    still = observatory.compare({"transactions": [txn("open")]}, acc(0, a=1), {}, 10, "producer")
    assert still["verdict"] == "differs" and "still open 1" in still["difference"], still
    # Nothing seen by kproxy (404) and no account.
    assert observatory.compare({"transactions": [], "seen": False}, {"missing": "x"}, None, 10, "producer")["verdict"] == "not compared"
    # ctp: the records of the committed transactions against the outputs read, the group in each.
    ctp = observatory.compare({"transactions": [txn("committed", 6, groups=["g"])] * 4}, acc(4), {"records_read": 24}, 6, "ctp")
    assert ctp["verdict"] == "agrees", ctp
    ctp2 = observatory.compare({"transactions": [txn("committed", 6, groups=[])] * 4}, acc(4), {"records_read": 24}, 6, "ctp")
    assert ctp2["verdict"] == "differs" and "without the group's offsets" in ctp2["difference"], ctp2
    # A commit with neither records nor offsets (a late EndTxn on transaction.version 1 ended a
    # transaction that had only registered partitions) is noted, not a difference.
    ctp3 = observatory.compare({"transactions": [txn("committed", 6, groups=["g"])] * 4 + [txn("committed", 0, groups=[])]},
                               acc(4), {"records_read": 24}, 6, "ctp")
    assert ctp3["verdict"] == "agrees" and "1 committed transaction(s) without records" in ctp3["note"], ctp3
    # Committed without the group's offsets, which the verifier found too (wrong offsets): kproxy
    # agrees with the broker's log.
    ctp5 = observatory.compare({"transactions": [txn("committed", 6, groups=["g"])] * 3 + [txn("committed", 5, groups=[])]},
                               acc(3), {"records_read": 23, "class": "wrong offsets"}, 6, "ctp")
    assert ctp5["verdict"] == "agrees" and "as the verifier found" in ctp5["note"], ctp5
    # More than kproxy keeps per id: said so.
    ctp4 = observatory.compare({"transactions": [txn("committed", 6, groups=["g"])] * 17}, acc(17), {"records_read": 102}, 6, "ctp")
    assert ctp4["verdict"] == "differs" and "history full" in ctp4["difference"], ctp4


def cell(client, scenario, protocol, cls, seen=None, obs="agrees", runs=None, elapsed=10.0):
    c = {"client": client, "scenario": scenario, "protocol": protocol, "workload": "producer", "class": cls,
         "matches_expect": cls == "exact", "expect": "exact", "protocol_seen": seen or protocol, "elapsed_s": elapsed,
         "faults_injected_total": 1, "kproxy_exit": 0, "records_per_txn": 10,
         "account": {"committed_count": 5, "aborted_count": 0, "unknown_count": 0},
         "verifier": {"class": cls, "atomicity_checked": True, "also": [], "records_read": 50},
         "observatory": {"verdict": obs, "transactions": [txn("committed")] * (5 if obs == "agrees" else 6)},
         "run_id": f"{scenario}-{client}", "dir": "/nonexistent"}
    if runs:
        c["runs"] = [{"class": r, "elapsed_s": elapsed} for r in runs]
        c["classes"] = runs
    return c


def test_shards_merge_into_one_report(tmp_path):
    header = {"date": "d", "seed": 1, "kproxy_commit": "c", "kproxy": "k", "scenario_mode": "flag", "scenario_mode_text": "t",
              "kafka_version": "4.4.0", "nodes": 3, "cluster_tv": 2, "transactions": 5, "records_per_txn": 10, "partitions": 3,
              "cell_timeout_s": 120, "repeat": 2, "transaction_timeout_ms": 10000, "verifier_timeout_s": 60, "command": "x",
              "work_dir": "w", "complete": True, "min_committed_fraction": 0.5}
    sc = [{"name": "00-baseline", "version": 1, "number": 0, "protocols": [1, 2], "expect": "exact", "runnable": True,
           "mode": "producer", "description": "b"},
          {"name": "06-concurrent-transactions-endtxn", "version": 1, "number": 3, "protocols": [1, 2], "expect": "exact",
           "runnable": True, "mode": "producer", "description": "c"}]
    a = dict(header, wall_s=100, cells_planned=2, shard="1/2", scenarios=sc, clients={"java-4.4": {"version": "4.4.0"}},
             cells=[cell("java-4.4", "00-baseline", 2, "exact", elapsed=12.0),
                    cell("java-4.4", "06-concurrent-transactions-endtxn", 2, "flaky", runs=["exact", "stuck"], elapsed=30.0)])
    b = dict(header, wall_s=50, cells_planned=2, shard="2/2", scenarios=sc, clients={"sarama": {"version": "v1"}}, command="y",
             notes=["these cells ran again"],
             cells=[cell("sarama", "00-baseline", 2, "exact", seen=1),
                    cell("sarama", "06-concurrent-transactions-endtxn", 2, "exact", seen=1, obs="differs")])
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    out_md, out_json = tmp_path / "m.md", tmp_path / "m.json"
    r = subprocess.run([str(REPO_ROOT / "scripts" / "conformance"), "--report-from", str(tmp_path / "a.json"),
                        "--report-from", str(tmp_path / "b.json"), "--tv", "2", "--out", str(out_md), "--json", str(out_json),
                        "--note", "shard 2 ran a day later"],
                       capture_output=True, text=True, timeout=60, cwd=str(REPO_ROOT))
    assert r.returncode == 0, r.stdout + r.stderr
    doc, md = json.loads(out_json.read_text()), out_md.read_text()
    assert doc["notes"] == ["these cells ran again", "shard 2 ran a day later"], doc["notes"]
    assert len(doc["cells"]) == 4 and doc["wall_s"] == 150 and doc["shards"] == ["1/2", "2/2"], {k: doc[k] for k in ("wall_s", "shards")}
    # Every source's command and notes are in the header.
    assert doc["merged_commands"] == ["x", "y"] and "- command: `x`; merged with `y`" in md, doc["merged_commands"]
    assert "- note: these cells ran again" in md
    row = next(l for l in md.splitlines() if l.startswith("| 06-concurrent-transactions-endtxn "))
    assert "**flaky: exact / stuck**" in row and "exact (TV1 client; observatory differs)" in row, row
    # The observatory column was computed again from the stored history (6 commits against 5).
    assert row.rstrip(" |").endswith("differs: sarama: committed: kproxy 6, client 5"), row
    base = next(l for l in md.splitlines() if l.startswith("| 00-baseline "))
    assert "exact (TV1 client)" in base and base.rstrip(" |").endswith("agrees (2)"), base
    counts = md.split("## Counts per client")[1]
    assert "| java-4.4 (4.4.0) | producer | TV2 | 2 | 1 | 0 | 1 | 1 | 1 | 0 | 2 / 0 | 30, 30 |" in counts, counts
    # sarama spoke TV1 in both of its TV2 cells.
    assert "| sarama (v1) | producer | TV2 | 2 | 2 | 0 | 0 | 2 | 0 | 2 | 1 / 1 | 10, 10 |" in counts, counts


def test_confirm_from_refuses_another_binary_or_a_run_that_was_not_a_first_pass(tmp_path):
    """--confirm-from: the repeats must run the binary of the first pass, and the first pass must
    be one run per cell; both refusals come before any broker starts (exit 2, the reason named)."""
    def run(doc):
        first = tmp_path / "first.json"
        first.write_text(json.dumps(doc))
        return subprocess.run([str(REPO_ROOT / "scripts" / "conformance"), "--no-setup", "--confirm-from", str(first),
                               "--kproxy", "/bin/true", "--scenarios", "00", "--clients", "java-4.4", "--tv", "2",
                               "--out", str(tmp_path / "r.md"), "--json", str(tmp_path / "r.json")],
                              capture_output=True, text=True, timeout=120)

    other = run({"kproxy": "/bin/false", "repeat": 1, "confirm": False, "cells": []})
    assert other.returncode == 2, other.stdout + other.stderr
    assert "the repeats must run the same binary" in other.stderr
    repeated = run({"kproxy": "/bin/true", "repeat": 2, "confirm": False, "cells": []})
    assert repeated.returncode == 2, repeated.stdout + repeated.stderr
    assert "not a first pass" in repeated.stderr
    # A --confirm run is resumed from its repeats' records, which must be there to read.
    lost = run({"kproxy": "/bin/true", "repeat": 1, "confirm": True, "cells": [
        {"client": "java-4.4", "scenario": "00-baseline", "protocol": 2, "class": "flaky",
         "runs": [{"class": "exact", "run_id": "r1", "dir": str(tmp_path / "gone-1")},
                  {"class": "runner error", "run_id": "r2", "dir": str(tmp_path / "gone-2")}]}]})
    assert lost.returncode == 2, lost.stdout + lost.stderr
    assert "a repeat's record is not readable" in lost.stderr and "gone-1" in lost.stderr, lost.stderr
    assert not (tmp_path / "r.json").exists()


def test_shards_of_different_kproxy_sources_are_not_merged(tmp_path):
    """A run split over sittings is one run only if every part ran the same kproxy sources: the
    header names them (and the binary's hash) when they agree, and --report-from refuses parts
    that differ, before writing anything."""
    header = {"date": "d", "seed": 1, "kproxy_commit": "c1", "kproxy": "k", "scenario_mode": "flag", "scenario_mode_text": "t",
              "kafka_version": "4.4.0", "nodes": 3, "cluster_tv": 2, "transactions": 5, "records_per_txn": 10, "partitions": 3,
              "cell_timeout_s": 120, "repeat": 1, "transaction_timeout_ms": 10000, "verifier_timeout_s": 60, "command": "x",
              "work_dir": "w", "complete": True, "min_committed_fraction": 0.5, "kproxy_source": "aaaaaaaaaaaa",
              "kproxy_sha256": "0123456789abcdef" * 4}
    sc = [{"name": "00-baseline", "version": 1, "number": 0, "protocols": [1, 2], "expect": "exact", "runnable": True,
           "mode": "producer", "description": "b"}]
    a = dict(header, wall_s=10, cells_planned=1, shard="1/2", scenarios=sc, clients={"java-4.4": {"version": "4.4.0"}},
             cells=[cell("java-4.4", "00-baseline", 2, "exact")])
    b = dict(a, shard="2/2", kproxy_commit="c2", clients={"sarama": {"version": "v1"}}, cells=[cell("sarama", "00-baseline", 2, "exact")])

    def merge(x, y):
        (tmp_path / "a.json").write_text(json.dumps(x))
        (tmp_path / "b.json").write_text(json.dumps(y))
        return subprocess.run([str(REPO_ROOT / "scripts" / "conformance"), "--report-from", str(tmp_path / "a.json"),
                               "--report-from", str(tmp_path / "b.json"), "--tv", "2", "--out", str(tmp_path / "m.md"),
                               "--json", str(tmp_path / "m.json")], capture_output=True, text=True, timeout=60, cwd=str(REPO_ROOT))

    same = merge(a, b)
    assert same.returncode == 0, same.stdout + same.stderr
    md = (tmp_path / "m.md").read_text()
    line = next(l for l in md.splitlines() if l.startswith("- kproxy commit: "))
    assert "kproxy sources aaaaaaaaaaaa" in line and "binary sha256 0123456789abcdef" in line and "merged with a run at c2" in line, line
    (tmp_path / "m.md").unlink()
    for other in ("bbbbbbbbbbbb", "aaaaaaaaaaaa-dirty"):
        r = merge(a, dict(b, kproxy_source=other))
        assert r.returncode == 2, r.stdout + r.stderr
        assert "one report is of one kproxy" in r.stderr and other in r.stderr, r.stderr
        assert not (tmp_path / "m.md").exists()


def test_confirm_from_refuses_a_first_pass_of_other_sources(tmp_path):
    first = tmp_path / "first.json"
    first.write_text(json.dumps({"kproxy": "/bin/true", "kproxy_source": "000000000000", "repeat": 1, "confirm": False, "cells": []}))
    r = subprocess.run([str(REPO_ROOT / "scripts" / "conformance"), "--no-setup", "--confirm-from", str(first),
                        "--kproxy", "/bin/true", "--scenarios", "00", "--clients", "java-4.4", "--tv", "2",
                        "--out", str(tmp_path / "r.md"), "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "its first pass ran kproxy sources 000000000000" in r.stderr and "the repeats must run the same code" in r.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_driver_not_set_up_stops_the_run_before_it_starts(tmp_path):
    """--no-setup with a version-pinned client whose setup never ran: refused with the setup to
    run (exit 2, no broker, no report), not a column of `crashed` cells."""
    r = subprocess.run([str(REPO_ROOT / "scripts" / "conformance"), "--no-setup", "--kproxy", "/bin/true",
                        "--clients", "sarama@v0.0.0-not-set-up", "--scenarios", "00", "--tv", "1",
                        "--out", str(tmp_path / "r.md"), "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "not set up" in r.stderr and "sarama@v0.0.0-not-set-up" in r.stderr and "sarama/setup" in r.stderr, r.stderr
    assert "starting Kafka" not in r.stdout and not (tmp_path / "r.json").exists()


def test_resuming_a_confirm_run_keeps_its_repeats_and_runs_its_runner_errors_again(tmp_path):
    """runs_of_earlier_cells: the records --confirm-from takes from an earlier --confirm run. Each
    repeat's record is its cell.json; a runner error is left out (so that repeat runs again), and a
    cell whose first run was one is run again whole."""
    sys.path.insert(0, str(REPO_ROOT / "conformance" / "runner"))
    import main as runner

    def rec_dir(run_id, cls):
        d = tmp_path / run_id
        d.mkdir()
        (d / "cell.json").write_text(json.dumps({"run_id": run_id, "class": cls, "account": {"committed": [1]}}))
        return {"class": cls, "run_id": run_id, "dir": str(d)}

    earlier = {"cells": [
        {"client": "a", "scenario": "s", "protocol": 1, "class": "flaky",
         "runs": [rec_dir("a1", "loss"), {"class": "runner error", "run_id": "a2", "dir": str(tmp_path / "none")},
                  rec_dir("a3", "loss")]},
        {"client": "b", "scenario": "s", "protocol": 1, "class": "exact", "run_id": "b1"},
        {"client": "c", "scenario": "s", "protocol": 2, "class": "runner error",
         "runs": [{"class": "runner error", "run_id": "c1", "dir": "/nonexistent"}, rec_dir("c2", "exact")]},
    ]}
    got = runner.runs_of_earlier_cells(earlier)
    assert sorted(got) == [("a", "s", 1, "producer"), ("b", "s", 1, "producer")], sorted(got)
    a = got[("a", "s", 1, "producer")]
    assert [(r["attempt"], r["run_id"], r["class"]) for r in a] == [(1, "a1", "loss"), (3, "a3", "loss")]
    assert a[0]["account"] == {"committed": [1]}  # the whole record, not the summary
    assert [(r["attempt"], r["run_id"]) for r in got[("b", "s", 1, "producer")]] == [(1, "b1")]
    # A record that is another run's is refused, not taken.
    (tmp_path / "a3" / "cell.json").write_text(json.dumps({"run_id": "other", "class": "loss"}))
    with pytest.raises(ValueError):
        runner.runs_of_earlier_cells(earlier)
