"""Exactly-once under chaos (issue #8): a Java consume-transform-produce job
(java/ConsumeTransformProduce.java: read_committed consumer, transactional producer,
sendOffsetsToTransaction, abort-and-rewind) runs through kproxy while seeded-probability fault
rules inject a random mix of retriable faults from docs/faults.md scenarios 1 (coordinator moved),
2 (coordinator loading), 3 (concurrent transactions), 7 (NOT_ENOUGH_REPLICAS on Produce) and
14 (latency, connections closed before / after forwarding, a reset in the middle of a Fetch
response, a blackholed response). Input is fed straight to the broker for the whole run.

Afterwards the output topic, read with read_committed straight from the broker, must hold
exactly the transformed multiset of the input topic: every input record once, none twice, none
of an aborted transaction. The figures (records, transactions, aborts, injections per rule as
kproxy's admin API counts them) are printed.

    KPROXY_EOS_SEED     rule seed (default 20261129; the CI run)
    KPROXY_EOS_SECONDS  how long input is fed and the job runs under faults (default 60)
    KPROXY_EOS_RATE     input records per second (default 200: the 12,000 records of the
                        earlier 120 s x 100/s default in half the time, issue #16)
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Dict, List, Tuple

import clients
import kafka_harness as kh
from test_proxy_support import Kproxy

SEED = int(os.environ.get("KPROXY_EOS_SEED", "20261129"))
SECONDS = float(os.environ.get("KPROXY_EOS_SECONDS", "60"))
RATE = float(os.environ.get("KPROXY_EOS_RATE", "200"))

TXN_APIS = ["InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit"]


def chaos_rules(seed: int) -> Dict[str, Dict]:
    """The rule mix; each rule's seed is derived from `seed`, so one number reproduces the run's
    injection decisions (hit n of rule r is injected iff hash(seed_r, n) < p)."""
    def p(prob: float, i: int) -> Dict:
        return {"probability": prob, "seed": seed * 100 + i}
    return {
        # 1: the coordinator moved / is not available: the client re-discovers it and retries.
        "s1-not-coordinator": {"match": {"api": TXN_APIS}, "action": {"answer": "NOT_COORDINATOR"}, "trigger": p(0.04, 1)},
        "s1-coordinator-not-available": {"match": {"api": TXN_APIS}, "action": {"answer": "COORDINATOR_NOT_AVAILABLE"},
                                         "trigger": p(0.03, 2)},
        # 2: the coordinator is loading its state: retried with backoff.
        "s2-coordinator-loading": {"match": {"api": TXN_APIS}, "action": {"answer": "COORDINATOR_LOAD_IN_PROGRESS"},
                                   "trigger": p(0.03, 3)},
        # 3: the previous transaction is still completing: retried.
        "s3-concurrent-transactions": {"match": {"api": ["InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn"]},
                                       "action": {"answer": "CONCURRENT_TRANSACTIONS"}, "trigger": p(0.05, 4)},
        # 7: partition verification / ISR too small: the batch is retried. (Every Produce through
        # kproxy is the job's: the feeder writes to the broker directly. No `topic:` filter: Produce
        # v13 names topics by id only (KIP-516), and kproxy's topic glob matches names.)
        "s7-not-enough-replicas": {"match": {"api": "Produce"},
                                   "action": {"answer": "NOT_ENOUGH_REPLICAS"}, "trigger": p(0.05, 5)},
        # 14: transport. Latency with jitter on the busy APIs.
        "s14-latency": {"match": {"api": ["Produce", "Fetch", "EndTxn", "TxnOffsetCommit", "AddOffsetsToTxn"]},
                        "action": {"delay": "40ms", "jitter": "40ms"}, "trigger": p(0.2, 6)},
        # Connection closed before the request is forwarded (any API: the broker never saw it) ...
        "s14-close-before": {"match": {}, "action": {"close": "before"}, "trigger": p(0.01, 7)},
        # ... and after it was forwarded (the broker did the work, the client never hears back).
        "s14-close-after": {"match": {"api": ["Produce", "EndTxn", "TxnOffsetCommit", "AddOffsetsToTxn", "InitProducerId"]},
                            "action": {"close": "after"}, "trigger": p(0.02, 8)},
        # A Fetch response cut after 100 bytes (reset in the middle of a frame).
        "s14-fetch-reset": {"match": {"api": "Fetch"}, "action": {"reset_after_bytes": 100}, "trigger": p(0.01, 9)},
        # A blackholed response: the client times the request out (request.timeout.ms) and retries.
        "s14-blackhole": {"match": {"api": ["Produce", "EndTxn"]}, "action": {"drop_response": True}, "trigger": p(0.005, 10)},
    }


def _admin(port: int, path: str, method: str = "GET", body: object = None) -> Tuple[int, Dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text.strip() else {})
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode(errors="replace")}


class Feeder(threading.Thread):
    """Writes input records straight to the broker (idempotent librdkafka producer, acks=all) at
    `rate` per second for `seconds`: key "in-<i>", value "in-<i>|<payload>"."""

    def __init__(self, bootstrap: str, topic: str, seconds: float, rate: float):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.seconds, self.rate = bootstrap, topic, seconds, rate
        self.sent = 0
        self.errors: List[str] = []

    def run(self) -> None:
        try:
            self._feed()
        except Exception as e:  # reported by the test (feeder.errors), not lost in a thread
            self.errors.append(f"feeder stopped: {type(e).__name__}: {e}")

    def _feed(self) -> None:
        import confluent_kafka
        p = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                                      "linger.ms": 5, "client.id": "kproxy-eos-feeder"})

        def on_delivery(err, _msg):
            if err is not None:
                self.errors.append(str(err))

        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < self.seconds:
            wait = t0 + i / self.rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            key = f"in-{i}"
            p.produce(self.topic, key=key.encode(), value=f"{key}|payload-{i * 7919 % 100003}-abc".encode(),
                      on_delivery=on_delivery)
            p.poll(0)
            i += 1
            self.sent = i
        left = p.flush(60)
        if left:
            self.errors.append(f"{left} input records undelivered")


def _transformed(rows: List[Tuple[int, int, str, str]]) -> collections.Counter:
    """The output the job must produce for these input records (ConsumeTransformProduce.transform)."""
    return collections.Counter((k, f"{k}|T|{v.upper()}|src={p}@{o}") for p, o, k, v in rows)


def test_eos_consume_transform_produce_under_random_faults(kafka, tmp_path):
    tag = uuid.uuid4().hex[:6]
    input_topic, output_topic = f"eos-in-{tag}", f"eos-out-{tag}"
    kafka.create_topic(input_topic, partitions=3)
    kafka.create_topic(output_topic, partitions=3)
    admin_port = kh.free_ports(1)[0]
    stop_file = tmp_path / "stop"
    with Kproxy(kafka.bootstrap(), name="eos", log_level="info",
                extra_yaml=f"admin: {{ listen: 127.0.0.1:{admin_port} }}\n") as kp:
        rules = chaos_rules(SEED)
        for name, rule in rules.items():
            status, body = _admin(admin_port, f"/faults/{name}", "PUT", rule)
            assert status == 200, (name, status, body)

        # delivery.timeout.ms = linger.ms + request.timeout.ms (5 ms + 5 s, the least the client
        # accepts): a blackholed Produce exhausts its batch's delivery time instead of being
        # retried, an abortable error, so the job's abort-and-rewind path runs under the same
        # retriable faults.
        job = clients.start_java("ConsumeTransformProduce", [
            "--bootstrap", kp.bootstrap, "--input", input_topic, "--output", output_topic,
            "--group", f"eos-{tag}", "--transactional-id", f"eos-{tag}", "--stop-file", stop_file,
            "--request-timeout-ms", 5000, "--delivery-timeout-ms", 5005,
            "--max-runtime-ms", int((SECONDS + 240) * 1000)])
        try:
            job.wait_for_line(r"^started", timeout=120)
            t_started = time.monotonic()
            feeder = Feeder(kafka.bootstrap(), input_topic, SECONDS, RATE)
            feeder.start()
            feeder.join(SECONDS + 90)
            assert not feeder.is_alive(), "feeder did not finish"
            assert feeder.errors == [], feeder.errors
            stop_file.write_text("stop\n")
            summary = job.result(timeout=300)
            under_faults_s = time.monotonic() - t_started
        finally:
            job.kill()

        status, faults = _admin(admin_port, "/faults")
        assert status == 200, faults
        injected = {f["name"]: (f["injected"], f["hits"]) for f in faults["faults"]}
        assert _admin(admin_port, "/faults/reset", "POST")[0] == 200
        kp_log = kp.log_text()
        assert kp.alive()
        assert kp.stop() == 0

    _in_sum, inputs = clients.read_committed_dump(kafka.bootstrap(), input_topic, tmp_path / "input.tsv")
    _out_sum, outputs = clients.read_committed_dump(kafka.bootstrap(), output_topic, tmp_path / "output.tsv")
    want = _transformed(inputs)
    got = collections.Counter((k, v) for _p, _o, k, v in outputs)
    missing, extra = want - got, got - want
    duplicates = sum(n - 1 for n in got.values() if n > 1)

    figures = {k: summary.get(k) for k in ("records", "transactions_committed", "transactions_aborted", "producer_restarts",
                                            "commit_retries", "abort_retries", "init_retries", "rebalances", "errors",
                                            "consumer_connection_close_total", "producer_connection_close_total", "elapsed_ms")}
    print(f"\n[eos] seed {SEED}, fed {SECONDS:.0f}s at {RATE:.0f}/s, job under faults {under_faults_s:.0f}s: input {len(inputs)} (fed {feeder.sent}), "
          f"output {len(outputs)}, missing {sum(missing.values())}, extra {sum(extra.values())}, duplicates {duplicates}")
    print(f"[eos] job {json.dumps(figures)}")
    print(f"[eos] causes {json.dumps(summary.get('causes'))}")
    print(f"[eos] injected/hits per rule {json.dumps(injected)} (total injected {sum(i for i, _h in injected.values())})")

    assert summary["ok"], summary
    assert under_faults_s >= SECONDS
    assert feeder.errors == [] and len(inputs) == feeder.sent > 0, (feeder.errors, len(inputs), feeder.sent)
    assert not missing and not extra, (f"{sum(missing.values())} input records missing from the output, "
                                       f"{sum(extra.values())} output records extra; e.g. {list(missing)[:3]} {list(extra)[:3]}")
    assert len(outputs) == len(inputs)
    # The faults really happened: every scenario family injected something.
    for family in ("s1-", "s2-", "s3-", "s7-", "s14-"):
        assert sum(i for name, (i, _h) in injected.items() if name.startswith(family)) > 0, (family, injected)
    assert "correlation id mismatch" not in kp_log
