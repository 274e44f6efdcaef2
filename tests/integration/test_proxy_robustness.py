"""Bad input and shutdown (issue #4, items 8 and 9): each bad connection is closed with a logged
reason while another client keeps working; SIGTERM drains in-flight requests within the deadline."""

import os
import select
import socket
import struct
import threading
import time

import clients
import kafka_harness as kh
from test_proxy_support import Kproxy, connection_closed, frame, recv_frame, request

# A TLS 1.2 ClientHello record header plus the start of the handshake (what a TLS client sends first).
TLS_CLIENT_HELLO = bytes.fromhex("160301012c0100012803035b") + os.urandom(64)


def _send_and_expect_close(port, payload, then_close=False):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        if then_close:
            s.shutdown(socket.SHUT_WR)
        return connection_closed(s, 10)


def test_bad_input_closes_only_that_connection(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    with Kproxy(kafka.bootstrap(), name="bad", limits={"max_request_frame_bytes": "1MiB"}) as kp:
        # A well-behaved client keeps producing the whole time.
        stop = threading.Event()
        results = []

        def keep_producing():
            while not stop.is_set():
                results.append(clients.rd_produce(kp.bootstrap, topic_name, 20, key_prefix=f"ok{len(results)}-", timeout=30))

        worker = threading.Thread(target=keep_producing)
        worker.start()
        try:
            # Random bytes whose first four read as a huge size.
            assert _send_and_expect_close(kp.port, b"\x7f" + os.urandom(200))
            kp.wait_for_log(r"bad request framing: frame size \d+ exceeds the limit of 1048576 bytes")
            # A negative size.
            assert _send_and_expect_close(kp.port, struct.pack(">i", -5) + b"abcd")
            kp.wait_for_log(r"bad request framing: negative frame size -5")
            # A size just above the configured maximum.
            assert _send_and_expect_close(kp.port, struct.pack(">i", (1 << 20) + 1))
            # TLS on the plaintext port, recognised as such.
            assert _send_and_expect_close(kp.port, TLS_CLIENT_HELLO)
            kp.wait_for_log(r"bad request framing: TLS handshake bytes on a plaintext port")
            # A truncated frame, then the client goes away: nothing is forwarded.
            assert _send_and_expect_close(kp.port, struct.pack(">i", 100) + b"\x00\x03\x00\x04", then_close=True)
            # A header too short to parse.
            assert _send_and_expect_close(kp.port, frame(b"\x00\x03"))
            kp.wait_for_log(r"malformed request header")
            # A valid Produce header whose body cannot hold TransactionalId and Acks.
            assert _send_and_expect_close(kp.port, request(0, 9, 7, b"\xff", flexible=True))
            kp.wait_for_log(r"malformed ProduceRequest v9")
            # A valid Metadata header with a garbage body: forwarded (kproxy does not decode
            # request bodies it does not need); the broker refuses it and closes.
            assert _send_and_expect_close(kp.port, request(3, 12, 8, os.urandom(40), flexible=True))
            kp.wait_for_log(r"broker 127\.0\.0\.1:\d+ closed the connection with 1 requests in flight")
        finally:
            stop.set()
            worker.join(60)
        assert results and all(r["errors"] == [] and r["delivered"] == 20 for r in results), results
        assert kp.alive()
        assert kh.metadata("127.0.0.1", kp.port).brokers
        assert kp.stop() == 0


def _fetch_v4(cid, topic, max_wait_ms):
    # Fetch v4 (Kafka's FetchRequest.json): ReplicaId, MaxWaitMs, MinBytes, MaxBytes, IsolationLevel,
    # Topics[Topic, Partitions[Partition, FetchOffset, PartitionMaxBytes]].
    partition = struct.pack(">iqi", 0, 0, 1 << 20)  # an empty topic at offset 0: the broker waits max_wait_ms
    body = struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0) + kh._array([kh._str(topic) + kh._array([partition])])
    return request(1, 4, cid, body)


def _park_fetch(s, cid, topic, max_wait_ms):
    """Sends a Fetch that the broker parks for max_wait_ms and returns its correlation id. Right after
    CreateTopics a broker may still answer at once (the partition not yet ready for fetching): such an
    answer is read and the Fetch sent again, up to 20 times."""
    for attempt in range(20):
        s.sendall(_fetch_v4(cid + attempt, topic, max_wait_ms))
        readable, _, _ = select.select([s], [], [], 0.5)
        if not readable:
            return cid + attempt  # parked
        recv_frame(s)
        time.sleep(0.25)
    raise AssertionError(f"the broker never parked a Fetch of {topic} for {max_wait_ms} ms")


def test_sigterm_drains_in_flight_requests(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    with Kproxy(kafka.bootstrap(), name="drain", drain_timeout="15s", workers=2) as kp:
        idle = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
        with socket.create_connection(("127.0.0.1", kp.port), timeout=20) as s:
            cid = _park_fetch(s, 41, topic_name, 3000)  # a long poll: in flight for ~3 s
            t0 = time.monotonic()
            kp.signal(15)
            payload = recv_frame(s)  # the in-flight response still arrives...
            assert struct.unpack(">i", payload[:4])[0] == cid
            assert connection_closed(s, 10)  # ...then kproxy closes the connection
        assert connection_closed(idle, 5)  # idle connections close at once
        idle.close()
        kp.proc.wait(20)
        elapsed = time.monotonic() - t0
        assert kp.proc.returncode == 0
        assert 1.5 < elapsed < 15, elapsed
        log = kp.log_text()
        assert "in-flight requests answered" in log and "kproxy stopped" in log


def test_drain_deadline_closes_what_is_still_in_flight(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    with Kproxy(kafka.bootstrap(), name="deadline", drain_timeout="1s") as kp:
        with socket.create_connection(("127.0.0.1", kp.port), timeout=20) as s:
            _park_fetch(s, 42, topic_name, 20000)
            t0 = time.monotonic()
            kp.signal(15)
            assert connection_closed(s, 10)  # the client sees the disconnect: nothing silently lost
            kp.proc.wait(10)
            assert time.monotonic() - t0 < 5
        assert kp.proc.returncode == 0
        assert "drain deadline passed" in kp.log_text()


def test_upstream_unavailable_closes_client_promptly():
    port = kh.free_ports(1)[0]  # nothing listens here
    with Kproxy(f"127.0.0.1:{port}", name="noupstream") as kp:
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            t0 = time.monotonic()
            s.sendall(request(18, 0, 1, b""))
            assert connection_closed(s, 5)
            assert time.monotonic() - t0 < 2
        kp.wait_for_log(r"closed: upstream unavailable: cannot connect to 127\.0\.0\.1:\d+: connection refused")
        assert kp.stop() == 0


def test_max_connections_refuses_extra_clients(kafka):
    with Kproxy(kafka.bootstrap(), name="maxconn", limits={"max_connections": "2"}) as kp:
        a = socket.create_connection(("127.0.0.1", kp.port), timeout=5)
        b = socket.create_connection(("127.0.0.1", kp.port), timeout=5)
        time.sleep(0.3)
        with socket.create_connection(("127.0.0.1", kp.port), timeout=5) as c:
            assert connection_closed(c, 5)
        kp.wait_for_log(r"refused a connection: limits.max_connections reached")
        a.sendall(request(18, 0, 3, b""))
        assert struct.unpack(">i", recv_frame(a)[:4])[0] == 3
        a.close()
        b.close()
        assert kp.stop() == 0


def test_sighup_reload_refuses_a_bad_config_and_keeps_running(kafka):
    with Kproxy(kafka.bootstrap(), name="reload") as kp:
        good = kp.config_path.read_text()
        kp.config_path.write_text(good + "bogus_key: 1\n")
        kp.signal(1)
        kp.wait_for_log(r"reload refused, keeping the running config: .*kproxy.yaml:\d+:1: bogus_key: unknown key")
        assert kh.metadata("127.0.0.1", kp.port).brokers
        kp.config_path.write_text(good.replace("level: debug", "level: info"))
        kp.signal(1)
        kp.wait_for_log(r"config reloaded from")
        assert kh.metadata("127.0.0.1", kp.port).brokers
        assert kp.stop() == 0
