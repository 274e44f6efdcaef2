"""#31: the conformance verifier (conformance/verifier) and the Java drivers (conformance/drivers/java-*).

Two halves:
* the classifier alone, on hand-made accounts and reads (`Verifier --classify-only`, no broker):
  every class, the precedence between them, the all-or-nothing rule for unknown outcomes, order
  within a partition, other runs' records ignored;
* against the session's one broker (`kafka`): the Java 4.4 driver's good run is `exact`, and its
  known-bad modes (`--break duplicate|drop|dirty`) are caught as `duplicates`, `loss` and
  `dirty read`; a run fenced by a second producer with the same transactional.id is `exact, gave
  up as documented`; a run cut short by its deadline is `stuck`; a transaction left open on the
  broker makes the verifier report the partition stuck; the java-3.x build's good run is `exact`;
  a broker-refused batch (MESSAGE_TOO_LARGE, abortable) is aborted and the run still `exact`; the
  consume-transform-produce mode is `exact`; a driver that dies without an account is `crashed`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import kafka_harness as kh  # noqa: E402
import slowness  # noqa: E402

DRIVERS = kh.REPO_ROOT / "conformance" / "drivers"
VERIFIER = kh.REPO_ROOT / "conformance" / "verifier"
KEYS = ("class", "records_read", "committed_expected", "missing", "missing_count", "duplicate_count",
        "duplicates", "dirty_count", "dirty", "unknown_present", "order_violations", "detail")


def _setup(script: Path) -> None:
    p = subprocess.run([str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=slowness.scaled(600), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"{script} failed (rc={p.returncode}):\n{p.stdout}\n{p.stderr[-3000:]}"
    assert ": ready" in p.stdout, f"{script} did not say ready:\n{p.stdout}"


@pytest.fixture(scope="module")
def verifier_built():
    _setup(VERIFIER / "setup")


@pytest.fixture(scope="module")
def driver_built():
    _setup(DRIVERS / "java-4.4" / "setup")


def _last_json(out: str) -> dict:
    lines = [l for l in out.splitlines() if l.strip()]
    assert lines, "no output"
    return json.loads(lines[-1])


def classify(tmp_path: Path, account, records, *, stuck=(), driver_exit=None, timed_out=False, extra=None,
             args=()) -> dict:
    """Runs the classifier on `account` (a dict, a raw string for the file, or None: no file) and
    `records` (keys in read order, or (partition, key) pairs); `extra` adds keys to READ.json
    (log, lso, input, group_offsets), `args` options to the verifier."""
    acc = tmp_path / f"account-{time.monotonic_ns()}.json"
    if isinstance(account, dict):
        acc.write_text("progress line\n" + json.dumps(account) + "\n")
    elif isinstance(account, str):
        acc.write_text(account)
    read = tmp_path / f"read-{time.monotonic_ns()}.json"
    recs = []
    for n, r in enumerate(records):
        p, k = (0, r) if isinstance(r, str) else r
        recs.append({"partition": p, "offset": n, "key": k})
    read.write_text(json.dumps(dict({"records": recs, "stuck_partitions": list(stuck)}, **(extra or {}))))
    cmd = [str(VERIFIER / "run"), "--classify-only", str(acc), str(read), *map(str, args)]
    if driver_exit is not None:
        cmd += ["--driver-exit", str(driver_exit)]
    if timed_out:
        cmd.append("--driver-timed-out")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=slowness.scaled(60))
    assert p.returncode == 0, f"verifier rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    v = _last_json(p.stdout)
    assert set(KEYS) <= set(v), f"keys missing from {v}"
    return v


def account(committed=(), aborted=(), unknown=(), m=3, n=None, gave_up=False, reason=None, run_id="R", client="hand"):
    n = n if n is not None else len(committed) + len(aborted) + len(unknown)
    return {"client": client, "version": "0", "library": "none", "transactions": n, "records_per_txn": m,
            "run_id": run_id, "committed": list(committed), "aborted": list(aborted), "unknown": list(unknown),
            "errors": {}, "gave_up": gave_up, "give_up_reason": reason, "elapsed_s": 1.0}


def keys(i, m=3, run_id="R"):
    return [f"{run_id}:{i}:{j}" for j in range(m)]


# ---------------------------------------------------------------- the classifier, no broker

def test_classify_exact(verifier_built, tmp_path):
    # Other runs' records (another run id, one that merely starts with the same characters) are ignored.
    v = classify(tmp_path, account(committed=[0, 1], aborted=[2]),
                 keys(0) + ["other:0:0", "R0:0:0", "Rx"] + keys(1))
    assert v["class"] == "exact", v
    assert (v["records_read"], v["committed_expected"], v["missing_count"], v["dirty_count"],
            v["duplicate_count"], v["order_violations"]) == (6, 6, 0, 0, 0, 0), v


def test_classify_unknown_all_or_nothing_is_exact(verifier_built, tmp_path):
    v = classify(tmp_path, account(committed=[0], unknown=[1, 2]), keys(0) + keys(2))
    assert v["class"] == "exact", v
    assert v["unknown_present"] == [2], v


def test_classify_unknown_partly_visible_is_loss(verifier_built, tmp_path):
    v = classify(tmp_path, account(committed=[0], unknown=[1]), keys(0) + keys(1)[:2])
    assert v["class"] == "loss", v
    assert v["missing"] == ["R:1:2"] and v["missing_count"] == 1, v
    assert v["unknown_present"] == [1], v


def test_classify_loss(verifier_built, tmp_path):
    v = classify(tmp_path, account(committed=[0, 1, 2]), keys(0) + keys(2) + ["R:1:0"])
    assert v["class"] == "loss", v
    assert v["missing"] == ["R:1:1", "R:1:2"] and v["missing_count"] == 2, v
    assert v["committed_expected"] == 9 and v["records_read"] == 7, v


def test_classify_duplicates(verifier_built, tmp_path):
    v = classify(tmp_path, account(committed=[0, 1]), keys(0) + keys(1) + keys(0))
    assert v["class"] == "duplicates", v
    assert v["duplicate_count"] == 3 and v["duplicates"] == keys(0), v
    assert v["order_violations"] == 0, v   # a second copy is not counted as reordering


def test_classify_dirty_read_of_aborted(verifier_built, tmp_path):
    v = classify(tmp_path, account(committed=[0], aborted=[1]), keys(0) + ["R:1:1"])
    assert v["class"] == "dirty read", v
    assert v["dirty"] == ["R:1:1"] and v["dirty_count"] == 1, v


def test_classify_dirty_read_of_unreported_txn(verifier_built, tmp_path):
    # Transaction 5 is in none of the account's lists (and j=7 is out of range for txn 0).
    v = classify(tmp_path, account(committed=[0]), keys(0) + ["R:5:0", "R:0:7"])
    assert v["class"] == "dirty read", v
    assert v["dirty_count"] == 2 and set(v["dirty"]) == {"R:5:0", "R:0:7"}, v


def test_classify_reordered_within_one_partition_only(verifier_built, tmp_path):
    same = classify(tmp_path, account(committed=[0]), [(0, "R:0:1"), (0, "R:0:0"), (0, "R:0:2")])
    assert same["class"] == "reordered" and same["order_violations"] == 1, same
    # Different partitions have no order between them.
    apart = classify(tmp_path, account(committed=[0]), [(1, "R:0:1"), (0, "R:0:0"), (0, "R:0:2")])
    assert apart["class"] == "exact" and apart["order_violations"] == 0, apart


def test_classify_gave_up_as_documented(verifier_built, tmp_path):
    """Gave up as documented only with an entry of conformance/verifier/documented-fatal.json for
    the client: the same reason from a client whose docs do not name it, or another reason from
    the Java client, is "gave up (undocumented)"."""
    acc = account(committed=[0], unknown=[1], n=4, gave_up=True, reason="fatal: PRODUCER_FENCED", client="java-4.4")
    v = classify(tmp_path, acc, keys(0))
    assert v["class"] == "exact, gave up as documented", v
    assert "PRODUCER_FENCED" in v["detail"] and v["documented_by"]["doc"].startswith("https://kafka.apache.org/"), v
    other = classify(tmp_path, dict(acc, client="hand"), keys(0))
    assert other["class"] == "gave up (undocumented)" and other["gave_up_documented"] is False, other
    abort = classify(tmp_path, dict(acc, give_up_reason="abort failed: KafkaException"), keys(0))
    assert abort["class"] == "gave up (undocumented)", abort
    # A per-protocol entry: franz-go's docs call INVALID_PRODUCER_EPOCH recoverable below KIP-890 part 2.
    fg = dict(acc, client="franz-go", give_up_reason="EndTransaction(TryCommit) failed: INVALID_PRODUCER_EPOCH")
    assert classify(tmp_path, fg, keys(0), args=["--protocol", "2"])["class"] == "exact, gave up as documented"
    assert classify(tmp_path, fg, keys(0), args=["--protocol", "1"])["class"] == "gave up (undocumented)"


def test_classify_stuck(verifier_built, tmp_path):
    deadline = classify(tmp_path, account(committed=[0], n=10, gave_up=True, reason="deadline"), keys(0))
    assert deadline["class"] == "stuck", deadline
    assert "1 of 10" in deadline["detail"], deadline
    killed = classify(tmp_path, None, [], driver_exit=137, timed_out=True)
    assert killed["class"] == "stuck", killed
    open_txn = classify(tmp_path, account(committed=[0]), keys(0), stuck=[2])
    assert open_txn["class"] == "stuck" and "[2]" in open_txn["detail"], open_txn


def test_classify_crashed(verifier_built, tmp_path):
    no_file = classify(tmp_path, None, keys(0), driver_exit=1)
    assert no_file["class"] == "crashed" and "exit code 1" in no_file["detail"], no_file
    garbage = classify(tmp_path, "Exception in thread main ...\n{not json\n", keys(0), driver_exit=134)
    assert garbage["class"] == "crashed", garbage
    # An account with a non-zero exit is judged on its content.
    judged = classify(tmp_path, account(committed=[0]), keys(0), driver_exit=1)
    assert judged["class"] == "exact" and "driver exit 1" in judged["detail"], judged


def test_classify_precedence(verifier_built, tmp_path):
    everything = keys(0) + keys(0) + ["R:2:0"] + [(0, "R:3:1"), (0, "R:3:0")]   # dup, dirty, loss (1), reordered (3)
    acc = account(committed=[0, 1, 3], aborted=[2])
    assert classify(tmp_path, acc, everything)["class"] == "dirty read"
    assert classify(tmp_path, acc, [r for r in everything if r != "R:2:0"])["class"] == "duplicates"
    assert classify(tmp_path, acc, keys(0) + [(0, "R:3:1"), (0, "R:3:0")])["class"] == "loss"
    assert classify(tmp_path, acc, keys(0) + keys(1) + [(0, "R:3:1"), (0, "R:3:0"), (0, "R:3:2")])["class"] == "reordered"
    # A driver stopped at its deadline is stuck, but that no longer hides what was read.
    stuck = account(committed=[0, 1, 3], aborted=[2], n=4, gave_up=True, reason="deadline")
    v = classify(tmp_path, stuck, everything)
    assert v["class"] == "dirty read" and {"duplicates", "loss", "reordered", "stuck"} <= set(v["also"]), v
    assert classify(tmp_path, stuck, keys(0) + keys(1) + keys(3))["class"] == "stuck"
    assert classify(tmp_path, None, everything, driver_exit=1)["class"] == "crashed"


def test_classify_bad_account(verifier_built, tmp_path):
    """The account must be the run the runner started (run id, N, M), list each index once, and
    give every transaction an outcome unless the driver gave up."""
    ok = ["--expect-run-id", "R", "--expect-transactions", "2", "--expect-records-per-txn", "3"]
    assert classify(tmp_path, account(committed=[0, 1]), keys(0) + keys(1), args=ok)["class"] == "exact"
    v = classify(tmp_path, account(committed=[0, 1], run_id="S"), [], args=ok)
    assert v["class"] == "bad account" and "run_id S" in v["detail"], v
    v = classify(tmp_path, account(committed=[0, 1], m=2), keys(0, 2) + keys(1, 2), args=ok)
    assert v["class"] == "bad account" and "records_per_txn 2" in v["detail"], v
    v = classify(tmp_path, account(committed=[0], n=2), keys(0), args=ok)
    assert v["class"] == "bad account" and "[1] have no outcome" in v["detail"], v
    v = classify(tmp_path, account(committed=[0, 1], aborted=[1], n=2), keys(0) + keys(1), args=ok)
    assert v["class"] == "bad account" and "listed twice" in v["detail"], v
    # Gave up: the indexes from the one in progress on may be missing, not earlier ones.
    gave = account(committed=[0], n=4, gave_up=True, reason="fatal: PRODUCER_FENCED", client="java-4.4")
    assert classify(tmp_path, gave, keys(0))["class"] == "exact, gave up as documented"
    hole = account(committed=[0, 2], n=4, gave_up=True, reason="fatal: PRODUCER_FENCED", client="java-4.4")
    assert classify(tmp_path, hole, keys(0) + keys(2))["class"] == "bad account"


def test_classify_no_progress(verifier_built, tmp_path):
    """Every transaction aborted after a bounded fault, the driver never gave up: not exact."""
    v = classify(tmp_path, account(aborted=[0, 1, 2, 3, 4]), [])
    assert v["class"] == "no progress" and v["progress"] == 0 and "0 of 5" in v["detail"], v
    # 2 of 5 is below the default half, 3 of 5 is not; the fraction is an option.
    assert classify(tmp_path, account(committed=[0, 1], aborted=[2, 3, 4]), keys(0) + keys(1))["class"] == "no progress"
    assert classify(tmp_path, account(committed=[0, 1, 2], aborted=[3, 4]), keys(0) + keys(1) + keys(2))["class"] == "exact"
    assert classify(tmp_path, account(committed=[0, 1], aborted=[2, 3, 4]), keys(0) + keys(1),
                    args=["--min-committed-fraction", "0.2"])["class"] == "exact"
    # Unknown outcomes that are wholly visible committed.
    assert classify(tmp_path, account(committed=[0], unknown=[1, 2]), keys(0) + keys(1) + keys(2))["class"] == "exact"


def log_of(units):
    """A raw log: `units` = [(partition, pid, epoch, [keys], "COMMIT"|"ABORT"|None)], in order."""
    out, offs = [], {}
    for p, pid, epoch, ks, marker in units:
        for k in ks:
            out.append({"partition": p, "offset": offs.get(p, 0), "key": k, "pid": pid, "epoch": epoch})
            offs[p] = offs.get(p, 0) + 1
        if marker:
            out.append({"partition": p, "offset": offs.get(p, 0), "control": marker, "pid": pid, "epoch": epoch})
            offs[p] = offs.get(p, 0) + 1
    return out


def test_classify_atomicity(verifier_built, tmp_path):
    acc = account(committed=[0, 1, 2])
    recs = [(0, k) for k in keys(0)] + [(1, k) for k in keys(1)] + [(0, k) for k in keys(2)]
    good = log_of([(0, 7, 0, keys(0), "COMMIT"), (1, 7, 0, keys(1), "COMMIT"), (0, 7, 0, ["R:9:0"], "ABORT"),
                   (0, 7, 0, keys(2), "COMMIT")])
    v = classify(tmp_path, acc, recs, extra={"log": good})
    assert v["class"] == "exact" and v["atomicity_checked"] and v["commits"] == 3 and v["aborts"] == 1, v
    # Transaction 1 split over two commits in one partition (the read_committed view is the same).
    split = log_of([(0, 7, 0, keys(0), "COMMIT"), (1, 7, 0, keys(1)[:1], "COMMIT"), (1, 7, 0, keys(1)[1:], "COMMIT"),
                    (0, 7, 0, keys(2), "COMMIT")])
    v = classify(tmp_path, acc, recs, extra={"log": split})
    assert v["class"] == "not atomic" and v["not_atomic"] == ["transaction 1: partition 1: 2 commits"], v
    # Transaction 1's records in two partitions under two epochs (transaction.version 2: one epoch per transaction).
    recs2 = [(0, k) for k in keys(0)] + [(0, "R:1:0"), (1, "R:1:1"), (1, "R:1:2")] + [(0, k) for k in keys(2)]
    epochs = log_of([(0, 7, 1, keys(0), "COMMIT"), (0, 7, 2, ["R:1:0"], "COMMIT"), (1, 7, 3, ["R:1:1", "R:1:2"], "COMMIT"),
                     (0, 7, 4, keys(2), "COMMIT")])
    v = classify(tmp_path, acc, recs2, extra={"log": epochs})
    assert v["class"] == "not atomic" and "producer id/epoch" in v["not_atomic"][0], v
    # Two transactions in one commit.
    merged = log_of([(0, 7, 0, keys(0) + keys(2), "COMMIT"), (1, 7, 0, keys(1), "COMMIT")])
    v = classify(tmp_path, acc, [(0, k) for k in keys(0) + keys(2)] + [(1, k) for k in keys(1)], extra={"log": merged})
    assert v["class"] == "not atomic" and "together with transaction(s) [2]" in v["not_atomic"][0], v
    # A retry inside one transaction: the duplicate is written inside the same commit.
    dup = log_of([(0, 7, 0, keys(0) + ["R:0:1"], "COMMIT")])
    v = classify(tmp_path, account(committed=[0]), keys(0) + ["R:0:1"], extra={"log": dup})
    assert v["class"] == "duplicates" and "inside the same transaction" in v["detail"], v


def test_classify_stuck_does_not_hide_loss(verifier_built, tmp_path):
    """A partition left open: committed records behind it (in the log, past its LSO) are hidden,
    not lost; a committed record that is nowhere is loss, with stuck in "also"."""
    acc = account(committed=[0, 1])
    log = log_of([(0, 7, 0, keys(0), "COMMIT"), (0, 8, 0, ["other:0:0"], None), (0, 7, 0, keys(1), "COMMIT")])
    v = classify(tmp_path, acc, keys(0), stuck=[0], extra={"log": log, "lso": {"0": 4}})
    assert v["class"] == "stuck" and v["hidden_by_open_transaction"] == 3 and v["missing_count"] == 0, v
    gone = log_of([(0, 7, 0, keys(0), "COMMIT"), (0, 8, 0, ["other:0:0"], None)])
    v = classify(tmp_path, acc, keys(0), stuck=[0], extra={"log": gone, "lso": {"0": 4}})
    assert v["class"] == "loss" and v["also"] == ["stuck"] and v["missing_count"] == 3, v


def test_classify_ctp_offsets(verifier_built, tmp_path):
    """Consume-transform-produce: the group's committed offsets must be the last input of each
    committed transaction + 1: inputs below them all have an output, none above."""
    acc = dict(account(committed=[0, 1], m=2, run_id="C:in"), workload="ctp")
    inputs = [{"partition": 0, "offset": 0, "key": "in:0:0"}, {"partition": 0, "offset": 1, "key": "in:0:1"},
              {"partition": 0, "offset": 3, "key": "in:1:0"}, {"partition": 0, "offset": 4, "key": "in:1:1"}]
    outs = ["C:in:0:0", "C:in:0:1", "C:in:1:0", "C:in:1:1"]
    v = classify(tmp_path, acc, outs, extra={"input": inputs, "group_offsets": {"0": 6}})
    assert v["class"] == "exact" and v["offsets_checked"], v
    # Off by one: the last input is committed as consumed although its offset was.
    v = classify(tmp_path, acc, outs, extra={"input": inputs, "group_offsets": {"0": 4}})
    assert v["class"] == "wrong offsets" and "in:1:1" in v["offset_problems"][0], v
    # Offsets past an input that has no output.
    v = classify(tmp_path, dict(acc, committed=[0], aborted=[1]), outs[:2], extra={"input": inputs, "group_offsets": {"0": 6}})
    assert v["class"] == "wrong offsets" and len(v["offset_problems"]) == 2, v


# ---------------------------------------------------------------- against one real broker

def run_driver(family: str, bootstrap: str, topic: str, run_id: str, *extra, n=6, m=20, timeout_s=60):
    cmd = [str(DRIVERS / family / "run"), "--bootstrap", bootstrap, "--topic", topic,
           "--transactional-id", f"conf-{run_id}", "--transactions", str(n), "--records-per-txn", str(m),
           "--run-id", run_id, "--timeout-s", str(timeout_s), *map(str, extra)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=slowness.scaled(timeout_s + 60), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"driver rc={p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    acc = _last_json(p.stdout)
    assert set(acc) == {"client", "version", "library", "transactions", "records_per_txn", "run_id", "committed",
                        "aborted", "unknown", "errors", "gave_up", "give_up_reason", "elapsed_s"}, acc
    return p.stdout, acc


def verify(tmp_path: Path, bootstrap: str, topic: str, driver_stdout: str, timeout_s=30, extra=()) -> dict:
    acc = tmp_path / f"account-{time.monotonic_ns()}.json"
    acc.write_text(driver_stdout)
    cmd = [str(VERIFIER / "run"), "--bootstrap", bootstrap, "--topic", topic, "--account", str(acc),
           "--timeout-s", str(timeout_s), "--save-read", str(tmp_path / "read.json"), *extra]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=slowness.scaled(3 * timeout_s + 60), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"verifier rc={p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    v = _last_json(p.stdout)
    print(f"[verifier] {topic}: {json.dumps(v)}")
    return v


@pytest.fixture
def topic(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=3)
    return topic_name


def test_good_java_4_4_run_is_exact(kafka, topic, driver_built, verifier_built, tmp_path):
    b = kafka.bootstrap()
    out, acc = run_driver("java-4.4", b, topic, "good")
    assert (acc["client"], acc["version"]) == ("java-4.4", "4.4.0"), acc
    assert acc["committed"] == list(range(6)) and not acc["gave_up"], acc
    # A second, different run in the same topic: its records do not count for the first.
    run_driver("java-4.4", b, topic, "other", n=2)
    v = verify(tmp_path, b, topic, out)
    assert v["class"] == "exact", v
    assert v["records_read"] == 120 == v["committed_expected"], v
    read = json.loads((tmp_path / "read.json").read_text())
    assert {r["partition"] for r in read["records"]} == {0, 1, 2}, "the records should spread over 3 partitions"


@pytest.mark.parametrize("mode, want", [("duplicate", "duplicates"), ("drop", "loss"), ("dirty", "dirty read")])
def test_known_bad_java_driver_is_caught(kafka, topic, driver_built, verifier_built, tmp_path, mode, want):
    b = kafka.bootstrap()
    out, acc = run_driver("java-4.4", b, topic, f"bad-{mode}", "--break", mode)
    assert not acc["gave_up"], acc
    v = verify(tmp_path, b, topic, out)
    assert v["class"] == want, v
    if mode == "duplicate":
        assert v["duplicate_count"] == 20 and v["duplicates"][0].startswith("bad-duplicate:0:"), v
    elif mode == "drop":
        assert v["missing_count"] == 20 and v["missing"][0] == "bad-drop:3:0", v
    else:
        assert acc["aborted"] == [3], acc
        assert v["dirty_count"] == 20 and v["dirty"][0].startswith("bad-dirty:3:"), v


def test_fenced_run_gave_up_as_documented(kafka, topic, driver_built, verifier_built, tmp_path):
    b = kafka.bootstrap()
    out, acc = run_driver("java-4.4", b, topic, "fenced", "--fence-before-commit", 2)
    assert acc["gave_up"] and acc["give_up_reason"] == "fatal: PRODUCER_FENCED", acc
    assert acc["committed"] == [0, 1] and acc["unknown"] == [2], acc
    assert acc["errors"].get("PRODUCER_FENCED") == 1, acc
    v = verify(tmp_path, b, topic, out)
    assert v["class"] == "exact, gave up as documented", v
    assert v["unknown_present"] == [] and v["records_read"] == 40, v   # the fencer aborted txn 2


def test_deadline_run_is_stuck(kafka, topic, driver_built, verifier_built, tmp_path):
    b = kafka.bootstrap()
    out, acc = run_driver("java-4.4", b, topic, "late", n=100000, m=2, timeout_s=4)
    assert acc["gave_up"] and acc["give_up_reason"] == "deadline", acc
    assert 3 <= acc["elapsed_s"] < 10, acc
    v = verify(tmp_path, b, topic, out)
    assert v["class"] == "stuck", v
    assert v["missing_count"] == 0 and v["dirty_count"] == 0 and v["duplicate_count"] == 0, v


def test_open_transaction_makes_partition_stuck(kafka, topic, verifier_built, tmp_path):
    """A transaction left open on the broker (librdkafka, no commit): the LSO stays below the high
    watermark, so the verifier says which partition and classes the run stuck."""
    ck = pytest.importorskip("confluent_kafka")
    b = kafka.bootstrap()
    p = ck.Producer({"bootstrap.servers": b, "transactional.id": "conf-open-txn", "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, key=b"open:0:0", value=b"x", partition=1)
    p.flush(30)
    try:
        acc = account(committed=[], aborted=[0], run_id="open", m=1)
        # The verifier waits past the transaction timeout + the abort cleanup interval (here told
        # 1 ms and 0: 10 s) before it calls a partition stuck.
        t0 = time.monotonic()
        v = verify(tmp_path, b, topic, json.dumps(acc), timeout_s=4,
                   extra=["--transaction-timeout-ms", "1", "--abort-cleanup-ms", "0"])
        assert time.monotonic() - t0 >= 10, "the verifier gave up waiting before transaction timeout + cleanup + 10 s"
        assert v["class"] == "stuck", v
        assert v["stuck_partitions"] == [1], v
    finally:
        p.abort_transaction(30)


def test_good_java_3x_run_is_exact(kafka, topic, verifier_built, tmp_path):
    _setup(DRIVERS / "java-3.x" / "setup")
    b = kafka.bootstrap()
    out, acc = run_driver("java-3.x", b, topic, "three", n=4, m=10)
    assert acc["client"] == "java-3.x" and acc["version"].startswith("3."), acc
    v = verify(tmp_path, b, topic, out)
    assert v["class"] == "exact" and v["records_read"] == 40, v


def test_consume_transform_produce_is_exact(kafka, topic, driver_built, verifier_built, tmp_path):
    """--mode ctp: 5 input transactions of 8 records (written by a produce-mode run with run id
    "in") read_committed in a group, transformed one-to-one with sendOffsetsToTransaction; the
    output holds every input record exactly once, each in its input partition (so in order)."""
    b = kafka.bootstrap()
    out_topic = topic + "-out"
    kafka.create_topic(out_topic, partitions=3)
    run_driver("java-4.4", b, topic, "in", n=5, m=8)
    out, acc = run_driver("java-4.4", b, out_topic, "ctp", "--mode", "ctp", "--input-topic", topic,
                          "--group", f"g-{topic}", n=5, m=8)
    assert acc["run_id"] == "ctp:in" and acc["committed"] == [0, 1, 2, 3, 4] and not acc["gave_up"], acc
    # With the input topic and the group the verifier also checks the group's committed offsets.
    v = verify(tmp_path, b, out_topic, out, extra=["--input-topic", topic, "--group", f"g-{topic}"])
    assert v["offsets_checked"] and v["inputs"] == 40 and not v["offset_problems"], v
    assert v["class"] == "exact" and v["records_read"] == 40, v
    read = json.loads((tmp_path / "read.json").read_text())
    assert sorted(r["key"] for r in read["records"]) == sorted(f"ctp:in:{i}:{j}" for i in range(5) for j in range(8))


def test_abortable_broker_error_is_aborted_and_exact(kafka, topic_name, driver_built, verifier_built, tmp_path):
    """The broker refuses every data batch (a 200-character run id makes each record larger than the
    topic's max.message.bytes=300, which the transaction markers still fit: with 40 even the abort
    marker is refused and the next transaction's produce gets CONCURRENT_TRANSACTIONS until the
    deadline). MESSAGE_TOO_LARGE is abortable: the driver aborts each transaction and goes on;
    nothing of them is visible, which is exact."""
    b = kafka.bootstrap()
    kafka.create_topic(topic_name, partitions=1, configs={"max.message.bytes": "300"})
    run_id = "L" * 200
    out, acc = run_driver("java-4.4", b, topic_name, run_id, n=3, m=2)
    assert acc["committed"] == [] and acc["aborted"] == [0, 1, 2] and not acc["gave_up"], acc
    # Each refused record's delivery error (2 per transaction) and each commit that reports it.
    assert acc["errors"] == {"MESSAGE_TOO_LARGE": 9}, acc
    # Nothing committed at all is "no progress" (v2), whatever the cause; with no minimum it is exact.
    v = verify(tmp_path, b, topic_name, out)
    assert v["class"] == "no progress" and v["records_read"] == 0 and v["committed_expected"] == 0, v
    v = verify(tmp_path, b, topic_name, out, extra=["--min-committed-fraction", "0"])
    assert v["class"] == "exact", v


def test_driver_without_account_is_crashed(driver_built, verifier_built, tmp_path):
    """A driver that dies before printing its account (here: a bad option value) exits non-zero
    with no JSON; the verifier calls that crashed."""
    cmd = [str(DRIVERS / "java-4.4" / "run"), "--bootstrap", "127.0.0.1:1", "--topic", "t", "--transactional-id", "x",
           "--transactions", "many", "--records-per-txn", "2", "--run-id", "c"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=slowness.scaled(60))
    assert p.returncode != 0 and "{" not in p.stdout, (p.returncode, p.stdout)
    v = classify(tmp_path, p.stdout, [], driver_exit=p.returncode)
    assert v["class"] == "crashed" and f"exit code {p.returncode}" in v["detail"], v


def test_missing_topic_reads_empty(kafka, topic_name, verifier_built, tmp_path):
    """A topic that was never created reads as empty (topic_found false): a claimed commit is loss;
    with no account at all the verifier does not read and says crashed."""
    b = kafka.bootstrap()
    v = verify(tmp_path, b, topic_name, json.dumps(account(committed=[0], m=2, run_id="gone")), timeout_s=3)
    assert v["class"] == "loss" and v["topic_found"] is False and v["missing"] == ["gone:0:0", "gone:0:1"], v
    t0 = time.monotonic()
    none = verify(tmp_path, b, topic_name, "", timeout_s=30)
    assert none["class"] == "crashed", none
    assert time.monotonic() - t0 < slowness.scaled(15), "without an account there is nothing to wait for"


def test_timeouts_retried_as_documented(kafka, topic, driver_built, verifier_built, tmp_path):
    """max.block.ms=1 makes initTransactions, commitTransaction (and the first sends' metadata
    wait) throw TimeoutException: the driver calls initTransactions / commitTransaction again as
    the javadoc allows (a send that timed out aborts its transaction); every transaction still gets
    an outcome and what it reports is exactly what is visible."""
    b = kafka.bootstrap()
    out, acc = run_driver("java-4.4", b, topic, "hurry", "--property", "max.block.ms=1", n=10, m=5)
    print(f"[driver] {json.dumps(acc)}")
    assert not acc["gave_up"] and acc["unknown"] == [], acc
    assert sorted(acc["committed"] + acc["aborted"]) == list(range(10)) and acc["committed"], acc
    assert acc["errors"].get("REQUEST_TIMED_OUT", 0) >= 1, acc
    v = verify(tmp_path, b, topic, out)
    assert v["class"] == "exact" and v["records_read"] == 5 * len(acc["committed"]), v
