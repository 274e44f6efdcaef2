"""The transaction observatory under the seeded EOS chaos workload (issue #32).

Three transactional producers write through one kproxy to the real 3-node Kafka 4.4 cluster
(`kafka_cluster`, transaction.version 2 finalized), one after the other:

    java-tv1  TxnProducer (Java 4.4) on transaction.version 1: kproxy's ApiVersions policy shows
              "legacy-*" client ids transaction.version 1 (docs/api-versions-policy.md), so it
              adds partitions with AddPartitionsToTxn v3 and ends with EndTxn v4
    java-tv2  TxnProducer on transaction.version 2 (KIP-890: no AddPartitionsToTxn; kproxy takes
              the partitions from the Produce requests; EndTxn v5 gives a new epoch each time)
    rdkafka   librdkafka (confluent_kafka, clients.rd_txn_produce; no KIP-890 part 2)

Each writes TXNS transactions of RECORDS records under its own transactional.id; transaction t
writes to 1 + (t-1) % 3 partitions (so the partitions differ between transactions; partition 0
last) and every ABORT_EVERY-th one is aborted by the application. Each runs under its own copy
(rules scoped by its client id) of a seeded-probability fault mix: retriable coordinator errors
(CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR) on the transaction APIs,
NOT_ENOUGH_REPLICAS (retried) on Produce, and abortable errors that make the client abort the
transaction it is in and go on: INVALID_RECORD answered on Produce (with some probability, and on
the 4th Produce for certain), and for java-tv1 TOPIC_AUTHORIZATION_FAILED on an
AddPartitionsToTxn naming partition 0 (not for librdkafka: after that error it still sends
EndTxn(abort), which the coordinator, with no transaction open, answers INVALID_TXN_STATE, fatal
for the producer). Under librdkafka an injected INVALID_RECORD also costs the next transaction:
the broker never got that batch, so the next one's sequence skips and the broker answers
OUT_OF_ORDER_SEQUENCE_NUMBER; that abort's cause is the broker's error, and the check holds it to
that (the client reports the same).

Then, per path:
- kproxy_transactions_total deltas == the client's own committed / aborted counts == the
  read_committed reader's (the distinct transaction numbers in the records it reads straight
  from the cluster are exactly the client's committed transactions; records = committed x RECORDS);
- GET /transactions/{id} lists the client's transactions in order with the same outcomes;
- every aborted transaction has a cause (kproxy_transaction_aborts_total counts each abort once;
  in the history an abort without an error is the application's, cause "client"); an abort the
  client made because of an injected error names that rule (cause.injected_by) with the rule's
  error code; an application abort has no error cause;
- the partitions of each transaction in the history equal those the client sent its records to
  (for a transaction aborted because of an error, those kproxy saw are among them: the client
  stops sending once the transaction failed);
- the transaction_version kproxy shows is the path's.

The figures are printed side by side ([observatory-eos] lines).

    KPROXY_EOS_SEED  rule seed (default 20261129, as test_eos_chaos.py)
"""

from __future__ import annotations

import collections
import json
import os
import re
import time
import urllib.parse
import uuid
from typing import Dict, List, Tuple

import clients
import kafka_harness as kh
from test_chaos_support import ChaosKproxy

SEED = int(os.environ.get("KPROXY_EOS_SEED", "20261129"))
TXNS = 16          # GET /transactions/{id} keeps the last 16 of an id: the whole run of one path
RECORDS = 12       # per transaction: a multiple of 1, 2 and 3 partitions
ABORT_EVERY = 5    # the application aborts transactions 5, 10 and 15
PARTITIONS = 3

POLICY = 'api_versions:\n  - { feature: transaction.version, max: 1, client_id: "legacy-*" }\n'
OUTCOMES = ("committed", "aborted", "fenced", "timed_out", "unknown")

# path -> (client id, transaction.version kproxy must show, seed offset)
PATHS = {
    "java-tv1": ("legacy-obs-tv1", 1, 1),
    "java-tv2": ("obs-tv2", 2, 2),
    "rdkafka": ("obs-rdkafka", 1, 3),
}


def fault_rules(path: str, seed: int, client_id: str, tv: int) -> Dict[str, Dict]:
    """The seeded mix for one path (rule names without the path prefix)."""
    def p(prob: float, i: int) -> Dict:
        return {"probability": prob, "seed": seed * 100 + i}

    txn_apis = ["InitProducerId", "AddPartitionsToTxn", "EndTxn"] if tv == 1 else ["InitProducerId", "EndTxn"]
    rules = {
        "concurrent-transactions": {"match": {"api": txn_apis}, "action": {"answer": "CONCURRENT_TRANSACTIONS"}, "trigger": p(0.12, 1)},
        "coordinator-loading": {"match": {"api": txn_apis}, "action": {"answer": "COORDINATOR_LOAD_IN_PROGRESS"}, "trigger": p(0.08, 2)},
        "not-coordinator": {"match": {"api": txn_apis}, "action": {"answer": "NOT_COORDINATOR"}, "trigger": p(0.05, 3)},
        "produce-not-enough-replicas": {"match": {"api": "Produce"}, "action": {"answer": "NOT_ENOUGH_REPLICAS"}, "trigger": p(0.1, 4)},
        # Abortable: the client's send fails, it aborts the transaction. INVALID_RECORD, not
        # TOPIC_AUTHORIZATION_FAILED: after that one librdkafka fails the topic's next records
        # itself for a while, transactions that never reach the wire.
        "produce-abortable": {"match": {"api": "Produce"}, "action": {"answer": "INVALID_RECORD"}, "trigger": p(0.06, 5)},
        # ... and once for certain (the 4th Produce), whatever the draws.
        "produce-abortable-4th": {"match": {"api": "Produce"}, "action": {"answer": "INVALID_RECORD"}, "trigger": {"nth": 4}},
    }
    # An abortable AddPartitionsToTxn error: the Java client aborts without EndTxn when nothing
    # was added. Not for librdkafka: it sends EndTxn(abort) even then, and the coordinator, which
    # has no transaction open, answers INVALID_TXN_STATE, fatal for the producer.
    # Only an AddPartitionsToTxn naming partition 0, which the driver writes last in every
    # transaction (--spread-partitions): nothing is left waiting for a later AddPartitionsToTxn
    # when it is refused. A refusal while the client still has partitions waiting is ambiguous on
    # the wire: the Java client may add those while it aborts and send EndTxn(abort) (kproxy
    # then counts a second aborted transaction), or abort without EndTxn and add them in its next
    # transaction (docs/transactions.md, "What kproxy cannot know").
    if path == "java-tv1":
        rules["add-partitions-abortable"] = {"match": {"api": "AddPartitionsToTxn", "partition": 0},
                                             "action": {"answer": "TOPIC_AUTHORIZATION_FAILED"}, "trigger": p(0.15, 6)}
    for r in rules.values():
        r["match"]["client_id"] = client_id
    return rules


ABORTABLE = {"produce-abortable", "produce-abortable-4th", "add-partitions-abortable"}
# The Java client's exception -> the error code behind it (librdkafka reports the code's name).
JAVA_ERRORS = {"TopicAuthorizationException": "TOPIC_AUTHORIZATION_FAILED", "InvalidRecordException": "INVALID_RECORD",
               "OutOfOrderSequenceException": "OUT_OF_ORDER_SEQUENCE_NUMBER", "TransactionAbortableException": "TRANSACTION_ABORTABLE",
               "InvalidTxnStateException": "INVALID_TXN_STATE"}


def _client_error(cause: str) -> str:
    """The error code name of a client's abort cause."""
    if cause in JAVA_ERRORS:
        return JAVA_ERRORS[cause]
    if cause.endswith("Exception"):  # the rest, by Kafka's naming: NotEnoughReplicasException -> NOT_ENOUGH_REPLICAS
        return re.sub(r"(?<!^)(?=[A-Z])", "_", cause[: -len("Exception")]).upper()
    return cause


def _samples(text: str, name: str) -> List[Tuple[Dict[str, str], float]]:
    rx = re.compile(r"^" + re.escape(name) + r"(\{[^}]*\})?\s+(\S+)$", re.M)
    return [(dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or "")), float(m.group(2))) for m in rx.finditer(text)]


def _counts(text: str) -> Dict:
    """The transaction figures of one scrape."""
    out = {"outcome": collections.Counter(), "abort_causes": collections.Counter()}
    for labels, v in _samples(text, "kproxy_transactions_total"):
        out["outcome"][labels["outcome"]] += v
    for labels, v in _samples(text, "kproxy_transaction_aborts_total"):
        out["abort_causes"][(labels["cause"], labels["source"])] += v
    out["open"] = sum(v for _l, v in _samples(text, "kproxy_transactions_open"))
    return out


def _delta(after: Dict, before: Dict, key: str) -> Dict:
    return {k: int(after[key][k] - before[key].get(k, 0)) for k in after[key] if after[key][k] - before[key].get(k, 0)}


def _run_client(path: str, bootstrap: str, topic: str, txn_id: str, client_id: str) -> Dict:
    if path.startswith("java"):
        out = clients.run_java("TxnProducer", [
            "--bootstrap", bootstrap, "--topic", topic, "--records", TXNS * RECORDS, "--transactions", TXNS,
            "--transactional-id", txn_id, "--key-prefix", f"{path}-", "--abort-every", ABORT_EVERY,
            "--spread-partitions", "true", "--abort-on-error", "true", "--report-transactions", "true",
            "--timeout-ms", 30000, "--property", f"client.id={client_id}"], timeout=150)
        assert out["ok"], (path, out.get("error"), out["_stderr"][-3000:])
        return out
    out = clients.rd_txn_produce(bootstrap, topic, TXNS * RECORDS, TXNS, key_prefix=f"{path}-", abort_every=ABORT_EVERY,
                                 transactional_id=txn_id, conf={"client.id": client_id}, timeout=30,
                                 spread_partitions=True, abort_on_error=True)
    return out


def test_observatory_counts_causes_and_partitions_match_the_clients_under_seeded_faults(kafka_cluster, tmp_path):
    tag = uuid.uuid4().hex[:6]
    results: Dict[str, Dict] = {}
    failures: List = []
    t_start = time.monotonic()
    with ChaosKproxy(kafka_cluster.bootstrap(), name="obs-eos", log_level="info", extra_yaml=POLICY) as kp:
        for path, (client_id, tv, seed_offset) in PATHS.items():
            topic = f"obs-eos-{path}-{tag}"
            txn_id = f"obs-eos-{path}-{tag}"
            kafka_cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
            rules = fault_rules(path, SEED + seed_offset, client_id, tv)
            for name, rule in rules.items():
                status, body = kp.admin("PUT", f"/faults/{path}-{name}", rule)
                assert status == 200, (path, name, status, body)
            before = _counts(kp.metrics_text())
            t0 = time.monotonic()
            client = _run_client(path, kp.bootstrap, topic, txn_id, client_id)
            elapsed = time.monotonic() - t0
            after = _counts(kp.metrics_text())
            status, body = kp.admin("GET", "/transactions/" + urllib.parse.quote(txn_id, safe=""))
            assert status == 200, (path, status, body)
            status, faults = kp.admin("GET", "/faults")
            assert status == 200, faults
            injected = {f["name"][len(path) + 1:]: (f["injected"], f["hits"]) for f in faults["faults"] if f["name"].startswith(path + "-")}
            for name in rules:  # the next path runs without this one's rules
                assert kp.admin("DELETE", f"/faults/{path}-{name}")[0] in (200, 204)
            results[path] = {"topic": topic, "txn_id": txn_id, "client": client, "rules": rules, "injected": injected,
                             "outcomes": _delta(after, before, "outcome"), "abort_causes": _delta(after, before, "abort_causes"),
                             "open": after["open"], "history": body["transactions"], "elapsed": elapsed}
        status, open_now = kp.admin("GET", "/transactions")
        assert kp.alive()
        kp_log = kp.log_text()

    # Everything compared, for a look afterwards.
    dump = kh.REPO_ROOT / "build" / "test-logs" / f"observatory-eos-{tag}.json"
    dump.parent.mkdir(parents=True, exist_ok=True)
    dump.write_text(json.dumps({path: {k: v for k, v in r.items() if k != "abort_causes"} for path, r in results.items()}, indent=1, default=str))
    print(f"\n[observatory-eos] seed {SEED}; {TXNS} transactions x {RECORDS} records per path, every {ABORT_EVERY}th aborted "
          f"by the application; kproxy+clients {time.monotonic() - t_start:.0f}s; figures in {dump}")
    for path, r in results.items():
        client, history, rules = r["client"], r["history"], r["rules"]
        _client_id, tv, _s = PATHS[path]
        mine = client["transactions"]
        want_committed = {t["n"] for t in mine if t["outcome"] == "committed"}

        # The read_committed reader, straight from the cluster.
        _summary, rows = clients.read_committed_dump(kafka_cluster.bootstrap(), r["topic"], tmp_path / f"{path}.tsv")
        read_txns = collections.Counter(int(v.split("|")[1]) for _p, _o, _k, v in rows)
        read_keys = collections.Counter(k for _p, _o, k, _v in rows)

        kp_causes = []
        for h in history:
            if h["outcome"] in ("aborted", "fenced"):
                kp_causes.append(h["cause"]["error"] if h["cause"] else ("client" if h["outcome"] == "aborted" else "new_producer"))
        figures = {
            "committed": {"client": client["transactions_committed"], "kproxy_metric": r["outcomes"].get("committed", 0),
                          "kproxy_history": sum(h["outcome"] == "committed" for h in history), "read_committed": len(read_txns)},
            "aborted": {"client": client["transactions_aborted"], "kproxy_metric": r["outcomes"].get("aborted", 0),
                        "kproxy_history": sum(h["outcome"] == "aborted" for h in history),
                        "read_committed": TXNS - len(read_txns)},
            "records_committed": {"client": client["records_committed"], "read_committed": len(rows)},
        }
        print(f"[observatory-eos] {path}: {json.dumps(figures)}; other outcomes {json.dumps({k: v for k, v in r['outcomes'].items() if k not in ('committed', 'aborted')})}; "
              f"client {r['elapsed']:.1f}s")
        print(f"[observatory-eos] {path}: causes client {json.dumps(dict(collections.Counter(_client_error(t['cause']) for t in mine if t['cause'])))}, "
              f"kproxy history {json.dumps(dict(collections.Counter(kp_causes)))}, "
              f"kproxy_transaction_aborts_total {json.dumps({f'{c}/{s}': n for (c, s), n in r['abort_causes'].items()})}")
        print(f"[observatory-eos] {path}: injected/hits per rule {json.dumps(r['injected'])}; "
              f"retries seen by kproxy {sum(h['retries'] for h in history)}; transaction_version {sorted({h['transaction_version'] for h in history})}")

        def fail(what, *detail):
            failures.append((path, what) + detail)

        # Counts: client == kproxy (metrics and history) == read_committed reader.
        for outcome in ("committed", "aborted"):
            f = figures[outcome]
            if len(set(f.values())) != 1:
                fail(f"{outcome} counts differ", f)
        if set(read_txns) != want_committed:
            fail("read_committed transactions != the client's committed", sorted(read_txns), sorted(want_committed))
        if len(rows) != len(want_committed) * RECORDS or any(n != RECORDS for n in read_txns.values()) or any(n != 1 for n in read_keys.values()):
            fail("read_committed records", len(rows), dict(read_txns))
        if any(r["outcomes"].get(o, 0) for o in ("fenced", "timed_out", "unknown")) or r["open"]:
            fail("other outcomes or open transactions", r["outcomes"], r["open"])
        # Every abort counted once with a cause: the application's as "client", the others by the
        # error the client aborted on, "injected" exactly for those a rule of this path injected.
        injected_codes = {rules[n]["action"]["answer"] for n in rules if n in ABORTABLE}
        want_causes = collections.Counter()
        for t in mine:
            if t["outcome"] == "aborted":
                code = "client" if t["cause"] == "client" else _client_error(t["cause"])
                want_causes[(code, "injected" if code in injected_codes else "broker")] += 1
        if r["abort_causes"] != dict(want_causes):
            fail("kproxy_transaction_aborts_total deltas != the client's aborts by cause", r["abort_causes"], dict(want_causes))
        client_aborts = want_causes[("client", "broker")]

        # Transaction by transaction.
        if len(history) != len(mine):
            fail("history length", len(history), len(mine), [h["outcome"] for h in history])
        for t, h in zip(mine, history):
            where = f"transaction {t['n']}"
            if h["outcome"] != t["outcome"]:
                fail(f"{where}: outcome", h["outcome"], t)
                continue
            if h["transaction_version"] != tv:
                fail(f"{where}: transaction_version", h["transaction_version"])
            seen = sorted(p["partition"] for p in h["partitions"] if p["topic"] == r["topic"])
            if len(seen) != len(h["partitions"]):
                fail(f"{where}: partitions of another topic", h["partitions"])
            if t["cause"] in (None, "client"):
                if seen != t["partitions"]:
                    fail(f"{where}: partitions", seen, t["partitions"])
            elif not set(seen) <= set(t["partitions"]):
                fail(f"{where}: partitions of an aborted transaction not among the client's", seen, t["partitions"])
            if t["outcome"] != "aborted":
                continue
            cause = h["cause"]
            if t["cause"] == "client":
                if cause is not None:
                    fail(f"{where}: the application aborted, kproxy says {cause}", h["errors"])
                continue
            if cause is None:
                fail(f"{where}: aborted on {t['cause']}, kproxy has no cause", h["errors"])
                continue
            if cause["error"] != _client_error(t["cause"]):
                fail(f"{where}: the client aborted on {t['cause']}, kproxy's cause is {cause}", h["errors"])
            if cause["error"] in injected_codes or cause["injected_by"]:
                # Caused by a rule: it names that rule, one of this path's abortable ones, with its code.
                rule = (cause["injected_by"] or "")[len(path) + 1:]
                if rule not in ABORTABLE or not cause["injected_by"].startswith(path + "-") or rules[rule]["action"]["answer"] != cause["error"]:
                    fail(f"{where}: cause does not name the abortable rule of this path that injected it", cause, h["errors"])
        # The faults really happened, and some made the client abort.
        if sum(n for (_c, source), n in want_causes.items() if source == "injected") == 0:
            fail("no abort caused by an injected error", r["injected"])
        for name in ("concurrent-transactions", "produce-abortable-4th") + (("add-partitions-abortable",) if path == "java-tv1" else ()):
            if r["injected"].get(name, (0, 0))[0] == 0:
                fail(f"rule {name} never injected", r["injected"])

    assert status == 200 and open_now["count"] == 0, open_now
    assert "correlation id mismatch" not in kp_log
    assert not failures, "\n".join(repr(f) for f in failures)
