"""Issue #30: what a hostile client or a silent broker must not be able to do through kproxy.

1. Cut-through must not hand a hostile client's memory bill to the broker. A Kafka broker
   allocates a request's announced size as soon as the size prefix arrives; kproxy forwards a
   large request while it arrives only on a connection that has had an answer, only while the
   announced sizes of all such requests fit limits.max_streamed_request_bytes, and closes one
   that stalls (limits.request_stall_timeout). Checked against a broker of its own (-Xmx512m, as
   the harness starts every broker), so that a failure cannot break the shared one: 16 hostile
   connections announce 100 MiB each, half of them after an answered ApiVersions, and send
   16 MiB; a transactional Java producer through kproxy meanwhile commits every record, the
   broker logs no OutOfMemoryError.
2. A broker that accepts and never answers: a client that sends a request and then closes its
   side must not leave its pair open for good (limits.unanswered_request_timeout), nor one whose
   broker sent part of a response and stalled. The gauges come back to zero within the bound.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

import clients
import kafka_harness as kh
import slowness
from test_chaos_support import ChaosKproxy
from test_proxy_support import recv_frame, request

HOSTILE_SIZE = 100 * 1024 * 1024  # announced by each hostile request
HOSTILE_SENT = 16 * 1024 * 1024   # actually sent before closing
HOSTILE_CONNECTIONS = 16


@pytest.fixture(scope="module")
def own_broker():
    cluster = kh.KafkaCluster(1, name="protected")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _hostile_client(port: int, answered_first: bool, errors: list) -> None:
    """Announces a 100 MiB Produce v9 request, sends 16 MiB of zeros, closes (issue #30's repro).
    With `answered_first`, an ApiVersions request is answered before: the connection looks like a
    real client's."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            if answered_first:
                s.sendall(request(18, 0, 7, b""))
                recv_frame(s)
            s.sendall(struct.pack(">ihhi", HOSTILE_SIZE, 0, 9, 1))
            chunk = bytes(1 << 20)
            for _ in range(HOSTILE_SENT >> 20):
                s.sendall(chunk)
    except OSError as e:  # kproxy may close a hostile connection: that is allowed
        errors.append(repr(e))


def test_hostile_announcements_never_reach_the_broker(own_broker, tmp_path):
    topic = "protected-txn"
    own_broker.create_topic(topic, partitions=3)
    with ChaosKproxy(own_broker.bootstrap(), name="protect", workers=2) as kp:
        result = {}
        producer = threading.Thread(target=lambda: result.update(
            clients.txn_produce(kp.bootstrap, topic, 3000, 60, transactional_id="protected-steady", timeout=300)))
        producer.start()
        errors: list = []
        attackers = [threading.Thread(target=_hostile_client, args=(kp.port, i % 2 == 1, errors))
                     for i in range(HOSTILE_CONNECTIONS)]
        for t in attackers:
            t.start()
        for t in attackers:
            t.join(timeout=120)
        producer.join(timeout=330)
        assert not producer.is_alive(), "the steady transactional producer did not finish"
        assert result.get("error") is None, result
        assert result.get("records_committed") == 3000, result

        # None of the hostile announcements went to the broker ahead of its bytes: the ones on
        # first packets were never candidates, the answered ones did not fit the budget.
        assert kp.metric("kproxy_proxy_requests_streamed_total") == 0
        assert kp.metric("kproxy_proxy_requests_stream_refused_total") >= HOSTILE_CONNECTIONS // 2
        rows = clients.read_committed(kp.bootstrap, topic, 3000, timeout_ms=60000)
        assert (rows.get("count"), rows.get("unique_keys"), rows.get("duplicates")) == (3000, 3000, 0), rows
    log = own_broker.node(1).log_path.read_text(errors="replace")
    assert "OutOfMemoryError" not in log, log[log.find("OutOfMemoryError") - 2000:][:4000]
    assert own_broker.health() is None


def test_a_stalled_streamed_request_is_closed_by_its_deadline(own_broker):
    """An answered connection may stream a large request; one that stops sending its bytes is
    closed after limits.request_stall_timeout, its budget given back."""
    with ChaosKproxy(own_broker.bootstrap(), name="stall", workers=1,
                     limits={"request_stall_timeout": "1s", "max_streamed_request_bytes": "8MiB"}) as kp:
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            s.sendall(request(18, 0, 7, b""))
            recv_frame(s)
            # 2 MiB announced (fits the 8 MiB budget): 512 KiB of it, then nothing.
            s.sendall(struct.pack(">ihhi", 2 << 20, 0, 9, 1) + bytes(512 << 10))
            t0 = time.monotonic()
            s.settimeout(10 * slowness.factor())
            try:
                closed = s.recv(1) == b""
            except ConnectionResetError:
                closed = True
            waited = time.monotonic() - t0
        assert closed
        assert waited < 8 * slowness.factor(), waited
        kp.wait_for_log(r"stalled: no byte for 1000 ms \(limits.request_stall_timeout\)")
        assert kp.metric("kproxy_proxy_requests_streamed_total") == 1
        assert kp.metric("kproxy_proxy_wait_deadlines_total") == 1


class SilentBroker:
    """A TCP server on loopback that accepts and reads but never writes (a broker in a long GC
    pause, or behind a partition that drops packets); with `partial`, it answers each request
    with 1 KiB of an announced 200 MB response and then stalls."""

    def __init__(self, partial: bool = False):
        self.partial = partial
        self.sock = socket.create_server(("127.0.0.1", kh.free_ports(1)[0]))
        self.port = self.sock.getsockname()[1]
        self.conns: list = []
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        try:
            while not self.stopped:
                data = c.recv(65536)
                if not data:
                    return
                if self.partial and len(data) >= 12:
                    cid = data[8:12]
                    c.sendall(struct.pack(">i", 200_000_000) + cid + bytes(1024))
        except OSError:
            return

    def close(self) -> None:
        self.stopped = True
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.parametrize("partial", [False, True], ids=["never-answers", "stalls-mid-response"])
def test_a_silent_broker_does_not_keep_connections_open(partial):
    broker = SilentBroker(partial=partial)
    try:
        with ChaosKproxy(f"127.0.0.1:{broker.port}", name="silent", workers=1,
                         limits={"unanswered_request_timeout": "2s"}) as kp:
            for cid in (1, 2):
                with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
                    s.sendall(request(3, 4, cid, struct.pack(">i", -1) + b"\x00"))  # Metadata v4
                    time.sleep(0.5)  # the client waits a moment for its answer, then gives up
            deadline = time.monotonic() + 10 * slowness.factor()
            while time.monotonic() < deadline:
                if kp.metric("kproxy_connections", side="client") == 0 and kp.metric("kproxy_inflight_requests") == 0:
                    break
                time.sleep(0.1)
            assert kp.metric("kproxy_connections", side="client") == 0, kp.metrics_text()
            assert kp.metric("kproxy_connections", side="upstream") == 0, kp.metrics_text()
            assert kp.metric("kproxy_inflight_requests") == 0, kp.metrics_text()
            assert kp.metric("kproxy_connections_closed_total", reason="unanswered") == 2
            kp.wait_for_log(r"left 1 of them unanswered for 2000 ms \(limits.unanswered_request_timeout\)")
    finally:
        broker.close()
