"""OpenTelemetry traces of transactions (issue #32; docs/transactions.md "Traces") against a real
Jaeger: the all-in-one of Jaeger v1.75.0, built from Go modules by scripts/setup
(tests/integration/jaeger/build) into .cache/jaeger/bin/, started here on loopback ports (its OTLP
HTTP receiver and its query HTTP API; every other port it opens is given a loopback port too).

A Java transactional producer writes through kproxy, whose `tracing:` section points at Jaeger's
OTLP/HTTP receiver, while a fault rule answers the first EndTxn with CONCURRENT_TRANSACTIONS (the
producer retries it). The test then reads Jaeger's HTTP API (GET /api/traces?service=...) until the
traces are there (a bounded wait, no fixed sleep) and checks: one trace per transaction, its root
span "transaction <transactional.id>", a child span per request with the right API name, and the
injected error on the child span of the faulted EndTxn, with the rule's name.

The other tests point kproxy at a collector that is down, or that accepts and never answers:
the producer is not slowed, and the spans are dropped and counted.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Dict, List

import pytest

import clients
import kafka_harness as kh
import slowness
from test_chaos_support import ChaosKproxy
from test_proxy_support import fault_rule, stop_process

JAEGER_CACHE = Path(os.environ.get("KPROXY_JAEGER_CACHE", kh.REPO_ROOT / ".cache" / "jaeger"))
JAEGER_BIN = JAEGER_CACHE / "bin" / "jaeger-all-in-one"
LOG_DIR = kh.REPO_ROOT / "build" / "test-logs" / "jaeger"
SERVICE = "kproxy-it"


class Jaeger:
    """Jaeger all-in-one (in-memory storage) on loopback ports from ports.py."""

    FLAGS = ("admin.http", "collector.grpc-server", "collector.http-server", "collector.otlp.grpc", "collector.otlp.http",
             "query.grpc-server", "query.http-server")

    def __init__(self) -> None:
        self.ports = dict(zip(self.FLAGS, kh.free_ports(len(self.FLAGS))))
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"jaeger-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        self.proc = None

    @property
    def otlp_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['collector.otlp.http']}/v1/traces"

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['query.http-server']}"

    def start(self, timeout: float = 60.0) -> "Jaeger":
        cmd = [str(JAEGER_BIN)] + [f"--{flag}.host-port=127.0.0.1:{port}" for flag, port in self.ports.items()]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=kh._child_setup)
        deadline = time.monotonic() + slowness.scaled(timeout)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Jaeger exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}")
            try:
                self.get("/api/services")
                with socket.create_connection(("127.0.0.1", self.ports["collector.otlp.http"]), timeout=1):
                    return self
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Jaeger did not answer within {timeout}s:\n{self.log_text()[-3000:]}")
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
            self.log.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def get(self, path: str) -> Dict:
        with urllib.request.urlopen(self.query_url + path, timeout=10) as r:
            return json.loads(r.read())

    def traces(self, service: str) -> List[Dict]:
        return self.get(f"/api/traces?service={service}&limit=1000&lookback=1h").get("data") or []


@pytest.fixture(scope="module")
def jaeger():
    if not JAEGER_BIN.exists():
        pytest.fail(f"Jaeger all-in-one is not built at {JAEGER_BIN}: run scripts/setup (tests/integration/jaeger/build)")
    j = Jaeger().start()
    try:
        yield j
    finally:
        j.stop()


def _tags(span: Dict) -> Dict[str, object]:
    return {t["key"]: t["value"] for t in span.get("tags", [])}


def _root(trace: Dict) -> Dict:
    roots = [s for s in trace["spans"] if not s.get("references")]
    assert len(roots) == 1, f"trace {trace['traceID']} has {len(roots)} root spans"
    return roots[0]


def _traces_of(jaeger: Jaeger, txn_id: str) -> List[Dict]:
    """Jaeger's traces whose root span is a transaction of `txn_id`, oldest first."""
    out = [t for t in jaeger.traces(SERVICE) if any(s["operationName"] == f"transaction {txn_id}" for s in t["spans"])]
    return sorted(out, key=lambda t: _root(t)["startTime"])


def _describe(trace: Dict) -> str:
    root = _root(trace)
    counts = collections.Counter(s["operationName"] for s in trace["spans"] if s is not root)
    lines = [f"trace {trace['traceID']}: root '{root['operationName']}' ({root['duration'] / 1000:.1f} ms) "
             f"{ {k: v for k, v in _tags(root).items() if k.startswith(('kafka.', 'kproxy.'))} }",
             f"  {len(trace['spans']) - 1} child spans: {dict(counts)}"]
    for s in sorted(trace["spans"], key=lambda s: s["startTime"]):
        if s is root:
            continue
        t = _tags(s)
        extra = {k: t[k] for k in ("error", "error.type", "kproxy.injected_by") if k in t}
        lines.append(f"    {s['operationName']:<20} v{t.get('kafka.api_version')} {s['duration'] / 1000:7.1f} ms {extra}")
    return "\n".join(lines)


def _tracing_yaml(endpoint: str, **extra: str) -> str:
    body = f"  endpoint: {endpoint}\n  service_name: {SERVICE}\n" + "".join(f"  {k}: {v}\n" for k, v in extra.items())
    return "tracing:\n" + body


def test_spans_of_transactions_under_faults_are_in_jaeger(kafka, jaeger, topic_name):
    kafka.create_topic(topic_name, partitions=2)
    txn_id = f"traced-{uuid.uuid4().hex[:8]}"
    transactions = 3
    rules = "faults:\n" + fault_rule("endtxn-busy", "api: EndTxn", "answer: CONCURRENT_TRANSACTIONS", "once")
    extra = _tracing_yaml(jaeger.otlp_endpoint, batch="{ max_spans: 64, interval: 200ms }") + rules
    with ChaosKproxy(kafka.bootstrap(), name="tracing", extra_yaml=extra) as kp:
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=30, transactions=transactions, key_prefix="tr-",
                                   transactional_id=txn_id)
        assert prod["ok"], prod.get("error")
        assert prod["records_committed"] == 30

        # The spans leave kproxy within a batch interval of each transaction's end; Jaeger stores
        # them when its receiver has them. Wait for all three traces, each with its EndTxn.
        deadline = time.monotonic() + slowness.scaled(30)
        traces: List[Dict] = []
        while True:
            traces = _traces_of(jaeger, txn_id)
            if len(traces) >= transactions and all(any(s["operationName"] == "EndTxn" for s in t["spans"]) for t in traces):
                break
            assert time.monotonic() < deadline, (
                f"Jaeger has {len(traces)} of {transactions} traces of {txn_id} after 30 s; kproxy exported "
                f"{kp.metric('kproxy_trace_spans_exported_total')} spans, dropped "
                f"{kp.metric('kproxy_trace_spans_dropped_total')}, failures {kp.metric('kproxy_trace_export_failures_total')}")
            time.sleep(0.2)

        exported = kp.metric("kproxy_trace_spans_exported_total")
        assert kp.metric("kproxy_trace_spans_dropped_total") == 0
        assert kp.metric("kproxy_trace_export_failures_total") == 0
        assert kp.stop() == 0

    # One trace per transaction, each a root and its children, nothing else.
    assert len(traces) == transactions, [_describe(t) for t in traces]
    assert exported == sum(len(t["spans"]) for t in traces)
    faulted = []
    for trace in traces:
        root = _root(trace)
        rt = _tags(root)
        assert rt["kafka.transactional_id"] == txn_id
        assert rt["kproxy.transaction.outcome"] == "committed", _describe(trace)
        assert rt["kafka.records"] == 10
        children = [s for s in trace["spans"] if s is not root]
        for s in children:
            assert s["references"] == [{"refType": "CHILD_OF", "traceID": trace["traceID"], "spanID": root["spanID"]}]
            t = _tags(s)
            assert t["kafka.api"] == s["operationName"]
            assert s["operationName"] in ("AddPartitionsToTxn", "Produce", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn")
            # Inside the transaction's span (Jaeger's microseconds: 2 us of rounding).
            assert root["startTime"] <= s["startTime"] and s["startTime"] + s["duration"] <= root["startTime"] + root["duration"] + 2
        names = collections.Counter(s["operationName"] for s in children)
        # The records went in (transaction.version 2: Produce alone; version 1: AddPartitionsToTxn first).
        assert names["Produce"] >= 1, _describe(trace)
        errors = [s for s in children if _tags(s).get("error") is True]
        if errors:
            faulted.append(trace)
            # The faulted EndTxn: kproxy answered it with the injected error; the client retried.
            assert names["EndTxn"] == 2, _describe(trace)
            assert len(errors) == 1, _describe(trace)
            e = _tags(errors[0])
            assert errors[0]["operationName"] == "EndTxn"
            assert e["error.type"] == "CONCURRENT_TRANSACTIONS"
            assert e["kproxy.injected_by"] == "endtxn-busy"
            assert e["otel.status_code"] == "ERROR"
            ends = sorted((s for s in children if s["operationName"] == "EndTxn"), key=lambda s: s["startTime"])
            assert ends[0] is errors[0], "the first EndTxn is the faulted one"
            assert "error" not in _tags(ends[1]) and "kproxy.injected_by" not in _tags(ends[1])
            assert rt["kproxy.transaction.retries"] == 1
        else:
            assert names["EndTxn"] == 1, _describe(trace)
            assert not any("kproxy.injected_by" in _tags(s) for s in children)
    assert len(faulted) == 1, [_describe(t) for t in traces]
    assert faulted[0] is traces[0], "the rule fires once: on the first transaction's EndTxn"
    print(f"\n[tracing] Jaeger returned {len(traces)} traces for {txn_id}; the faulted transaction:\n{_describe(faulted[0])}")
    for t in traces[1:]:
        print(_describe(t).splitlines()[1])


class _HungCollector:
    """Accepts connections on a loopback port, reads what comes, never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns: List[socket.socket] = []
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
                c.settimeout(0.1)
                self.conns.append(c)
            except OSError:
                pass
            for c in self.conns:
                try:
                    c.recv(65536)
                except OSError:
                    pass

    def close(self) -> None:
        self.stopping = True
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.parametrize("collector", ["down", "hung"])
def test_a_collector_down_or_hung_drops_and_counts_spans_and_the_producer_goes_through(kafka, topic_name, collector):
    """Nobody listens on the endpoint (down), or a listener takes the connection and never answers
    (hung: each POST waits its whole tracing.timeout, and the small queue fills behind it). The
    producer's transactions go through all the same (workers never wait for the exporter); the
    spans are dropped and counted, and kproxy stops within its flush deadline."""
    kafka.create_topic(topic_name, partitions=1)
    hung = _HungCollector() if collector == "hung" else None
    port = hung.port if hung else kh.free_ports(1)[0]
    transactions = 20
    extra = _tracing_yaml(f"http://127.0.0.1:{port}/v1/traces", max_queue_spans=8, max_spans_per_transaction=4,
                          batch="{ max_spans: 4, interval: 100ms }", timeout="2s")
    try:
        with ChaosKproxy(kafka.bootstrap(), name=f"tracing-{collector}", extra_yaml=extra) as kp:
            t0 = time.monotonic()
            prod = clients.txn_produce(kp.bootstrap, topic_name, records=40, transactions=transactions, key_prefix=f"{collector}-")
            took = time.monotonic() - t0
            assert prod["ok"], prod.get("error")
            assert prod["records_committed"] == 40
            # Every span is accounted for within a few POST timeouts: dropped for a reason (or, for a
            # hung collector, still queued or in the POST that hangs).
            deadline = time.monotonic() + slowness.scaled(30)
            while True:
                dropped = {r: kp.metric("kproxy_trace_spans_dropped_total", reason=r)
                           for r in ("queue_full", "export_failed", "shutdown", "per_transaction_limit")}
                failures = kp.metric("kproxy_trace_export_failures_total")
                if failures >= 1 and dropped["export_failed"] >= 1 and (collector == "down" or dropped["queue_full"] >= 1):
                    break
                assert time.monotonic() < deadline, (dropped, failures)
                time.sleep(0.2)
            assert kp.metric("kproxy_trace_spans_exported_total") == 0
            print(f"\n[tracing] collector {collector}: {transactions} transactions in {took:.1f}s; dropped {dropped}, "
                  f"{failures:.0f} failed POSTs")
            assert kp.stop() == 0
        log = kp.log_text()
        assert "tracing: " in log and "did not take them" in log
    finally:
        if hung:
            hung.close()
