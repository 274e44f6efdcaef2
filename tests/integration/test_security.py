"""Security limits of a running kproxy (issue #8, Security), each seen from outside:

  - the admin API with a bearer token (admin.token_file, or KPROXY_ADMIN_TOKEN) refuses requests without it or with a
    wrong one (401, nothing served), and serves the right one;
  - limits.max_connections: a client over the limit is closed at once, with a log line and
    kproxy_proxy_connections_refused_total, while the admitted clients keep working;
  - limits.max_response_frame_bytes: a real broker's Fetch answer above the limit closes only that
    client's connection, with a log line and kproxy_proxy_framing_errors_total;
  - /tap subscribers are capped: one over the cap gets 503; a freed slot can be taken again.

The unit tests cover the same limits at their source (tests/unit/proxy/admin/admin_server_test.cc,
tests/unit/proxy/tap/tap_hub_test.cc, tests/unit/codec/reader_test.cc, frame_reader_test.cc).
"""

from __future__ import annotations

import socket
import struct
import time
import urllib.error
import urllib.request

import confluent_kafka
import pytest

import kafka_harness as kh
from test_proxy_support import Kproxy, connection_closed, recv_frame, request

TOKEN = "soak-and-sanitize-0123456789abcdef"


def _http(port: int, path: str, token: str | None = None, method: str = "GET") -> tuple[int, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _metric(port: int, name: str, token: str | None = None) -> float:
    status, text = _http(port, "/metrics", token)
    assert status == 200, text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (line[len(name)] in " {"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _wait_admin(port: int, token: str | None = None) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            _http(port, "/healthz", token)
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"admin API on {port} never answered")


@pytest.mark.parametrize("source", ["token_file", "env"])
def test_admin_bearer_token_refuses_missing_and_wrong_tokens(kafka, source, tmp_path):
    admin = kh.free_ports(1)[0]
    if source == "token_file":  # admin.token_file in the YAML
        (tmp_path / "admin.token").write_text(TOKEN + "\n")
        yaml, env = f"admin: {{ listen: 127.0.0.1:{admin}, token_file: {tmp_path / 'admin.token'} }}\n", None
    else:  # the environment variable kproxy has always read
        yaml, env = f"admin: {{ listen: 127.0.0.1:{admin} }}\n", {"KPROXY_ADMIN_TOKEN": TOKEN}
    with Kproxy(kafka.bootstrap(), name=f"token-{source}", extra_yaml=yaml, env=env) as kp:
        _wait_admin(admin)
        for path, method in (("/metrics", "GET"), ("/faults/", "GET"), ("/log-level", "GET"), ("/faults/x", "DELETE")):
            for bad in (None, "", TOKEN[:-1], TOKEN + "0", TOKEN.upper(), "x" * len(TOKEN)):
                status, body = _http(admin, path, bad, method)
                assert status == 401, (path, bad, status, body)
                assert "kproxy_" not in body and "level" not in body, body  # nothing served
        assert _http(admin, "/metrics", TOKEN)[0] == 200
        assert _http(admin, "/log-level", TOKEN)[0] == 200
        # "Basic" instead of "Bearer", the right secret: still refused.
        req = urllib.request.Request(f"http://127.0.0.1:{admin}/metrics", headers={"Authorization": f"Basic {TOKEN}"})
        try:
            urllib.request.urlopen(req, timeout=10)
            raise AssertionError("Basic auth was accepted")
        except urllib.error.HTTPError as e:
            assert e.code == 401
        assert "bearer token required" in kp.log_text()
        assert kp.stop() == 0


def test_max_connections_refuses_with_log_line_and_metric(kafka):
    admin = kh.free_ports(1)[0]
    with Kproxy(kafka.bootstrap(), name="maxconn-metric", limits={"max_connections": "3"},
                extra_yaml=f"admin: {{ listen: 127.0.0.1:{admin} }}\n") as kp:
        _wait_admin(admin)
        before = _metric(admin, "kproxy_proxy_connections_refused_total")
        held = [socket.create_connection(("127.0.0.1", kp.port), timeout=5) for _ in range(3)]
        time.sleep(0.3)
        extra = [socket.create_connection(("127.0.0.1", kp.port), timeout=5) for _ in range(2)]
        for s in extra:
            assert connection_closed(s, 5)
            s.close()
        kp.wait_for_log(r"refused a connection: limits.max_connections reached")
        assert _metric(admin, "kproxy_proxy_connections_refused_total") - before == 2
        for i, s in enumerate(held):  # the admitted clients still work
            s.sendall(request(18, 0, 40 + i, b""))
            assert struct.unpack(">i", recv_frame(s)[:4])[0] == 40 + i
            s.close()
        assert kp.stop() == 0


def _fetch_v4(cid: int, topic: str) -> bytes:
    # Fetch v4 (Kafka's FetchRequest.json): ReplicaId, MaxWaitMs, MinBytes, MaxBytes, IsolationLevel,
    # Topics[Topic, Partitions[Partition, FetchOffset, PartitionMaxBytes]].
    partition = struct.pack(">iqi", 0, 0, 4 << 20)
    body = struct.pack(">iiiib", -1, 500, 1, 4 << 20, 0) + kh._array([kh._str(topic) + kh._array([partition])])
    return request(1, 4, cid, body)


def test_response_frame_limit_closes_only_that_connection(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    # 200 KiB of records straight to the broker; kproxy accepts responses up to 64 KiB.
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap(), "linger.ms": 50,
                                         "message.max.bytes": 1 << 20})
    for i in range(4):
        producer.produce(topic_name, key=f"big-{i}", value=bytes([65 + i]) * (50 * 1024))
    assert producer.flush(30) == 0
    admin = kh.free_ports(1)[0]
    with Kproxy(kafka.bootstrap(), name="respmax", limits={"max_response_frame_bytes": "64KiB"},
                extra_yaml=f"admin: {{ listen: 127.0.0.1:{admin} }}\n") as kp:
        _wait_admin(admin)
        before = _metric(admin, "kproxy_proxy_framing_errors_total")
        # The Fetch must reach the partition leader: through kproxy's port for that broker.
        leader = kh.metadata("127.0.0.1", kp.port, [topic_name]).topics[topic_name].partitions[0].leader
        with socket.create_connection(("127.0.0.1", kp.broker_port(leader)), timeout=10) as bystander, \
                socket.create_connection(("127.0.0.1", kp.broker_port(leader)), timeout=10) as s:
            s.sendall(_fetch_v4(5, topic_name))
            assert connection_closed(s, 15)
            kp.wait_for_log(r"bad response framing from broker: frame size \d+ exceeds the limit of 65536 bytes")
            bystander.sendall(request(18, 0, 6, b""))  # another connection is untouched
            assert struct.unpack(">i", recv_frame(bystander)[:4])[0] == 6
        assert _metric(admin, "kproxy_proxy_framing_errors_total") - before == 1
        assert kp.alive()
        assert kp.stop() == 0


def _open_tap(port: int) -> tuple[socket.socket, int]:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /tap HTTP/1.1\r\nHost: kproxy\r\n\r\n")
    head = b""
    while b"\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    return s, int(head.split(b" ", 2)[1])


def test_tap_subscribers_are_capped(kafka):
    admin = kh.free_ports(1)[0]
    with Kproxy(kafka.bootstrap(), name="tapcap", extra_yaml=f"admin: {{ listen: 127.0.0.1:{admin} }}\n") as kp:
        _wait_admin(admin)
        taps = []
        try:
            for _ in range(4):
                s, status = _open_tap(admin)
                taps.append(s)
                assert status == 200
            deadline = time.monotonic() + 10
            while _metric(admin, "kproxy_tap_subscribers") < 4 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _metric(admin, "kproxy_tap_subscribers") == 4
            over, status = _open_tap(admin)
            over.close()
            assert status == 503
            taps.pop().close()  # a slot frees once kproxy notices the subscriber left
            deadline = time.monotonic() + 15
            status = 503
            while status == 503 and time.monotonic() < deadline:
                kh.api_versions("127.0.0.1", kp.port)  # traffic makes the hub write to the closed subscriber
                s, status = _open_tap(admin)
                if status == 200:
                    taps.append(s)
                else:
                    s.close()
                    time.sleep(0.2)
            assert status == 200
        finally:
            for s in taps:
                s.close()
        assert kp.stop() == 0


def test_slow_admin_clients_do_not_delay_the_probes(kafka):
    """Issue #15 bug 2: 20 connections that sent one byte each (or a byte every few seconds) held
    every admin thread for 30 s and /healthz timed out. Now the probes answer within 1 s
    throughout, and a slow client's unfinished request is cut at the head deadline (408)."""
    admin = kh.free_ports(1)[0]
    with Kproxy(kafka.bootstrap(), name="slowadmin", extra_yaml=f"admin: {{ listen: 127.0.0.1:{admin} }}\n") as kp:
        _wait_admin(admin)
        assert _http(admin, "/readyz")[0] == 200  # latched: later probes do not ask the broker
        slow, trickle = [], []
        try:
            for _ in range(24):
                s = socket.create_connection(("127.0.0.1", admin), timeout=5)
                s.sendall(b"G")
                slow.append(s)
            for _ in range(4):
                trickle.append(socket.create_connection(("127.0.0.1", admin), timeout=5))
            worst = 0.0
            probes = 0
            end = time.monotonic() + 4
            sent = 0
            while time.monotonic() < end:
                head = b"GET /healthz HTTP/1.1\r\n"
                for s in trickle:
                    s.sendall(head[sent % len(head):sent % len(head) + 1])
                sent += 1
                for path in ("/healthz", "/readyz"):
                    t0 = time.monotonic()
                    req = urllib.request.Request(f"http://127.0.0.1:{admin}{path}")
                    with urllib.request.urlopen(req, timeout=1) as r:
                        assert r.status == 200
                    worst = max(worst, time.monotonic() - t0)
                    probes += 1
                time.sleep(0.3)
            assert probes >= 8 and worst < 1.0, (probes, worst)
            # Past the 5 s head deadline every slow client gets 408 and is closed: wait for each
            # answer before closing (a client closed first is gone, not counted as a 408).
            for s in slow:
                s.settimeout(10)
                answer = s.recv(4096)
                assert answer.startswith(b"HTTP/1.1 408 "), answer[:80]
        finally:
            for s in slow + trickle:
                s.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _metric(admin, "kproxy_admin_refusals_total") < 24:
            time.sleep(0.1)
        assert _metric(admin, "kproxy_admin_refusals_total") >= 24
        assert kp.stop() == 0
