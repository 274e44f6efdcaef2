"""Hostile clients must never cost a well-behaved client its connection (issue #46).

(a) Frame-memory attack: connections that announce a large Produce frame, send part of it and
    stall, while a real idempotent librdkafka producer and a read_committed consumer run through
    kproxy beside them. The attack of the issue (16 connections, 100 MiB announced, 16 MiB sent
    each) against a budget (limits.max_buffered_frame_bytes) of 128 MiB instead of 512 MiB, so
    that the attackers pass it (they send 256 MiB) at a cost a 2-core machine can pay. Before
    the fix (8bfb04ec) the same run refused 18 connections, 9 of them the steady clients'
    (their 245-byte responses, "134217728 held now" while the attackers had sent 64 MiB).
(b) Slowloris: connections sending one byte per second are closed by their own deadline
    (limits.request_completion_timeout, limits.first_request_timeout) while a steady client is
    served untouched.

Both record what the steady client saw (errors, worst latency) in a JSON file next to the
kproxy log, and print it (pytest -s shows it).
"""

import json
import socket
import struct
import threading
import time

import pytest

import clients
import slowness
from test_chaos_support import ChaosKproxy
from test_proxy_support import compact_str


def _produce_frame_start(announced: int, correlation_id: int) -> bytes:
    """The first bytes of a Produce v9 request frame whose size prefix announces `announced`
    bytes: size, header (api key 0, version 9, correlation id, client id, no tags), then the
    start of a body; the rest never comes."""
    header = struct.pack(">hhi", 0, 9, correlation_id) + struct.pack(">h", 8) + b"attacker" + b"\x00"
    body = compact_str(None) + struct.pack(">hi", -1, 30000)  # transactional id, acks, timeout
    return struct.pack(">i", announced) + header + body


class Attacker(threading.Thread):
    """One connection that announces `announced` bytes, sends `send` of them and stalls.
    `sent` is what the kernel took; `blocked` turns true once no byte went out for `stall`
    seconds (kproxy stopped reading it)."""

    def __init__(self, port: int, index: int, announced: int, send: int, stall: float = 2.0):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setblocking(False)
        self.index, self.announced, self.send_total, self.stall = index, announced, send, stall
        self.sent = 0
        self.blocked = False
        self.error = None
        self.stop = threading.Event()

    def run(self) -> None:
        chunk = b"\x00" * (256 << 10)
        pending = _produce_frame_start(self.announced, 1000 + self.index)
        last_progress = time.monotonic()
        try:
            while self.sent < self.send_total and not self.stop.is_set():
                if not pending:
                    pending = chunk[:min(len(chunk), self.send_total - self.sent)]
                try:
                    n = self.sock.send(pending)
                except BlockingIOError:
                    n = 0
                if n > 0:
                    self.sent += n
                    pending = pending[n:]
                    last_progress = time.monotonic()
                    self.blocked = False
                else:
                    if time.monotonic() - last_progress > self.stall:
                        self.blocked = True
                    time.sleep(0.02)
        except OSError as e:
            self.error = e

    def done(self) -> bool:
        return self.sent >= self.send_total or self.blocked or self.error is not None

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True


class SteadyClients:
    """An idempotent librdkafka producer (acks=all) producing `rate` records a second, and a
    read_committed consumer reading them, both through kproxy, each in its own thread. Counts
    every error either reports (error_cb, failed deliveries, consumer errors) and the latency of
    each record: produce() to its delivery report, and produce() to the consumer seeing it."""

    def __init__(self, bootstrap: str, topic: str, rate: int = 50):
        self.ck = clients._ck()
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.errors = []
        self.phase = "warmup"
        self.sent_at = {}
        self.delivery_latency = {}  # key -> seconds
        self.e2e_latency = {}
        self.seen = {}
        self.produced = 0
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.lock = threading.Lock()
        self.producer_thread = threading.Thread(target=self._produce, daemon=True)
        self.consumer_thread = threading.Thread(target=self._consume, daemon=True)

    def _error(self, who: str, err) -> None:
        with self.lock:
            self.errors.append(f"{self.phase} {who}: {err}")

    def _produce(self) -> None:
        p = self.ck.Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                              "client.id": "steady-producer", "error_cb": lambda e: self._error("producer", e)})

        def on_delivery(err, msg):
            key = msg.key().decode()
            if err is not None:
                self._error("delivery", err)
                return
            with self.lock:
                self.delivery_latency[key] = time.monotonic() - self.sent_at[key]

        i = 0
        next_at = time.monotonic()
        while not self.stop_producing.is_set():
            key = f"steady-{i}"
            with self.lock:
                self.sent_at[key] = time.monotonic()
            p.produce(self.topic, key=key.encode(), value=f"{key}|{self.phase}".encode(), on_delivery=on_delivery)
            i += 1
            self.produced = i
            next_at += 1.0 / self.rate
            p.poll(max(0.0, next_at - time.monotonic()))
        deadline = time.monotonic() + slowness.scaled(60)
        while len(p) and time.monotonic() < deadline:
            p.poll(0.1)
        if len(p):
            self._error("producer", f"{len(p)} record(s) undelivered at the end")

    def _consume(self) -> None:
        c = self.ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"steady-{time.monotonic_ns()}",
                              "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": "read_committed",
                              "client.id": "steady-consumer", "error_cb": lambda e: self._error("consumer", e)})
        c.subscribe([self.topic])
        try:
            while not self.stop_consuming.is_set():
                msg = c.poll(0.1)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() != self.ck.KafkaError._PARTITION_EOF:
                        self._error("consume", msg.error())
                    continue
                key = msg.key().decode()
                with self.lock:
                    self.seen[key] = self.seen.get(key, 0) + 1
                    if key in self.sent_at and key not in self.e2e_latency:
                        self.e2e_latency[key] = time.monotonic() - self.sent_at[key]
        finally:
            c.close()

    def start(self) -> None:
        self.consumer_thread.start()
        self.producer_thread.start()

    def wait_consumed(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + slowness.scaled(timeout)
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.seen) >= n:
                    return
            time.sleep(0.05)
        raise AssertionError(f"the consumer saw {len(self.seen)} of {n} records within {timeout} s; errors: {self.errors[:5]}")

    def finish(self, timeout: float = 60) -> None:
        self.stop_producing.set()
        self.producer_thread.join(slowness.scaled(timeout) + 60)
        self.wait_consumed(self.produced, timeout)
        self.stop_consuming.set()
        self.consumer_thread.join(30)

    def keys_between(self, t0: float, t1: float):
        with self.lock:
            return [k for k, t in self.sent_at.items() if t0 <= t <= t1]

    def summary(self, t0: float, t1: float) -> dict:
        keys = self.keys_between(t0, t1)
        with self.lock:
            delivery = [self.delivery_latency[k] for k in keys if k in self.delivery_latency]
            e2e = [self.e2e_latency[k] for k in keys if k in self.e2e_latency]
            return {"records_during": len(keys), "errors": len(self.errors), "error_samples": self.errors[:5],
                    "worst_delivery_latency_ms": round(1000 * max(delivery), 1) if delivery else None,
                    "worst_end_to_end_latency_ms": round(1000 * max(e2e), 1) if e2e else None,
                    "produced": self.produced, "consumed_unique": len(self.seen),
                    "duplicates": sum(n - 1 for n in self.seen.values()),
                    "lost": sum(1 for i in range(self.produced) if f"steady-{i}" not in self.seen)}


def _record(kp, name: str, result: dict) -> None:
    (kp.dir / f"{name}.json").write_text(json.dumps(result, indent=2))
    print(f"\n{name}: {json.dumps(result)}")


def test_stalled_partial_frames_never_cost_a_steady_client_its_connection(kafka, topic_name):
    attackers_n, announced, per_attacker = 16, 100 << 20, 16 << 20
    limits = {"max_request_frame_bytes": "100MiB", "max_response_frame_bytes": "64MiB", "max_buffered_frame_bytes": "128MiB",
              # The attackers must outlive the measurement: paused, not closed by their deadline.
              "request_completion_timeout": "300s", "first_request_timeout": "300s"}
    kafka.create_topic(topic_name, partitions=3)
    with ChaosKproxy(kafka.bootstrap(), name="fairmem", limits=limits, log_level="info") as kp:
        steady = SteadyClients(kp.bootstrap, topic_name)
        steady.start()
        steady.wait_consumed(100, 60)
        attack_start = time.monotonic()
        steady.phase = "attack"
        attackers = [Attacker(kp.port, i, announced, per_attacker) for i in range(attackers_n)]
        peak = {"bytes": 0.0}
        sampling = threading.Event()

        def sample():  # what kproxy holds of partial frames, while the attack lasts
            while not sampling.is_set():
                peak["bytes"] = max(peak["bytes"], kp.metric("kproxy_partial_frame_bytes"))
                sampling.wait(0.25)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            for a in attackers:
                a.start()
            deadline = time.monotonic() + slowness.scaled(60)
            while time.monotonic() < deadline and not all(a.done() for a in attackers):
                time.sleep(0.1)
            assert all(a.done() for a in attackers), [(a.sent, a.blocked) for a in attackers]
            # The steady clients keep going beside the stalled attackers for a while.
            hold_until = time.monotonic() + 10
            while time.monotonic() < hold_until:
                time.sleep(0.2)
            attack_end = time.monotonic()
            paused_now = kp.metric("kproxy_proxy_reads_paused", reason="frame_memory")
            paused_total = kp.metric("kproxy_proxy_reads_paused_total", reason="frame_memory")
            refusals = kp.metric("kproxy_proxy_frame_memory_refusals_total")
            sent = [a.sent for a in attackers]
            closed = [a.closed_by_peer() for a in attackers]
        finally:
            sampling.set()
            for a in attackers:
                a.stop.set()
        sampler.join(10)
        steady.phase = "after"
        steady.finish()
        result = steady.summary(attack_start, attack_end)
        result.update({"attacker_bytes_sent_mib": [round(s / (1 << 20), 1) for s in sent], "attackers_closed": sum(closed),
                       "peak_partial_frame_mib": round(peak["bytes"] / (1 << 20), 1), "reads_paused_now": paused_now, "reads_paused_total": paused_total, "frame_memory_refusals": refusals,
                       "attack_seconds": round(attack_end - attack_start, 1)})
        _record(kp, "fair-memory-attack", result)
        for a in attackers:
            a.sock.close()
        assert result["errors"] == 0, result["error_samples"]
        assert (result["lost"], result["duplicates"]) == (0, 0)
        assert result["records_during"] > 0
        # The attackers were stopped by pausing (not by refusing anyone), and kproxy did not take
        # their 256 MiB: what it held of them stayed near the 128 MiB budget (its bound adds each
        # worker's allowance, a sixteenth, and one read per connection in flight at the limit).
        assert refusals == 0
        assert paused_total >= 1 and paused_now >= 1
        assert sum(closed) == 0
        assert 0 < peak["bytes"] <= 176 << 20, result
        assert kp.alive()


def test_slow_senders_are_closed_by_their_deadlines(kafka, topic_name):
    n = 200  # the count
    limits = {"request_completion_timeout": "3s", "first_request_timeout": "6s"}
    kafka.create_topic(topic_name, partitions=1)
    with ChaosKproxy(kafka.bootstrap(), name="slowloris", limits=limits, log_level="info") as kp:
        closed_before = kp.metric("kproxy_connections_closed_total", reason="request_timeout")
        idle_before = kp.metric("kproxy_connections_closed_total", reason="first_request_timeout")
        # One connection that sends nothing at all: closed by the first-request deadline.
        idle = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
        frame = _produce_frame_start(1 << 20, 7)
        slow = [socket.create_connection(("127.0.0.1", kp.port), timeout=10) for _ in range(n)]
        opened = time.monotonic()
        for s in slow:
            s.setblocking(False)
        idle.setblocking(False)
        closed_at = {}
        idle_closed_at = None
        sent = 0
        steady = {}

        def run_steady():
            steady["produce"] = clients.rd_produce(kp.bootstrap, topic_name, 200, key_prefix="calm-")

        t = threading.Thread(target=run_steady, daemon=True)
        t.start()
        bound = slowness.scaled(3 + 5)  # the completion timeout, plus the loop's slack on a busy machine
        deadline = opened + bound + 10
        while time.monotonic() < deadline and (len(closed_at) < n or idle_closed_at is None):
            for i, s in enumerate(slow):
                if i in closed_at:
                    continue
                try:
                    if s.recv(1) == b"":
                        closed_at[i] = time.monotonic() - opened
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    closed_at[i] = time.monotonic() - opened
                    continue
                if sent < len(frame):
                    try:
                        s.send(frame[sent:sent + 1])
                    except OSError:
                        closed_at[i] = time.monotonic() - opened
            sent += 1
            if idle_closed_at is None:
                try:
                    if idle.recv(1) == b"":
                        idle_closed_at = time.monotonic() - opened
                except BlockingIOError:
                    pass
                except OSError:
                    idle_closed_at = time.monotonic() - opened
            time.sleep(1.0)
        t.join(slowness.scaled(90))
        result = {"slow_connections": n, "closed": len(closed_at), "latest_close_s": round(max(closed_at.values(), default=-1), 1),
                  "idle_closed_s": None if idle_closed_at is None else round(idle_closed_at, 1),
                  "steady_errors": steady.get("produce", {}).get("errors"), "steady_delivered": steady.get("produce", {}).get("delivered")}
        _record(kp, "slowloris", result)
        for s in slow + [idle]:
            s.close()
        assert len(closed_at) == n, result
        assert max(closed_at.values()) <= bound + 1.5, result  # + one turn of the 1 s send loop
        assert idle_closed_at is not None and idle_closed_at <= slowness.scaled(6 + 5) + 1.5, result
        assert kp.metric("kproxy_connections_closed_total", reason="request_timeout") - closed_before == n
        assert kp.metric("kproxy_connections_closed_total", reason="first_request_timeout") - idle_before == 1
        assert kp.metric("kproxy_proxy_request_completion_deadlines_total") >= n
        assert kp.metric("kproxy_proxy_first_request_deadlines_total") >= 1
        kp.wait_for_log(r"no whole request within 3000 ms \(limits\.request_completion_timeout\)")
        kp.wait_for_log(r"no request within 6000 ms of the accept \(limits\.first_request_timeout\)")
        assert steady["produce"]["errors"] == [] and steady["produce"]["delivered"] == 200, steady
        cons = clients.rd_consume(kp.bootstrap, topic_name, 200, key_prefix="calm-")
        assert (cons["count"], cons["duplicates"], cons["errors"]) == (200, 0, [])
