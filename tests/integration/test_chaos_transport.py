"""Chaos transport toxics (docs/faults.md scenario 14): slice, bandwidth and reset_after_bytes rules in
front of the real broker. The slicer and the reset are checked on the wire with a raw socket; the
bandwidth limit and the slicer together with a real client (librdkafka) that must still produce
and consume every record, exactly once, in the time the limit implies.
"""

import socket
import struct
import time

import clients
from test_chaos_support import ChaosKproxy
from test_proxy_support import request


def _api_versions_v0(sock: socket.socket) -> None:
    sock.sendall(request(18, 0, 5, b""))


def test_slicer_splits_the_response_into_delayed_pieces(kafka):
    with ChaosKproxy(kafka.bootstrap(), name="slicer") as kp:
        kp.put_rule("cut", {"match": {"api": "ApiVersions"}, "action": {"slice": 64, "slice_delay": "20ms"}})
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            _api_versions_v0(s)
            chunks = []
            size = None
            while size is None or sum(map(len, chunks)) < size + 4:
                data = s.recv(65536)
                assert data, "kproxy closed the connection"
                chunks.append(data)
                if size is None and sum(map(len, chunks)) >= 4:
                    size = struct.unpack(">i", b"".join(chunks)[:4])[0]
        total = sum(map(len, chunks))
        assert total == size + 4
        # 64-byte pieces at least 20 ms apart: the reads end on piece boundaries, and (unless this
        # process was descheduled for longer than the gap) see one piece each.
        ends, at = [], 0
        for c in chunks:
            at += len(c)
            ends.append(at)
        assert all(e % 64 == 0 for e in ends[:-1]), [len(c) for c in chunks]
        assert len(chunks) >= (total // 64) // 2, [len(c) for c in chunks]
        assert struct.unpack(">i", b"".join(chunks)[4:8])[0] == 5  # correlation id: the bytes are intact
        assert kp.rule("cut")["injected"] == 1
        assert kp.stop() == 0


def test_reset_after_bytes_sends_n_bytes_then_resets(kafka):
    with ChaosKproxy(kafka.bootstrap(), name="reset") as kp:
        kp.put_rule("rst", {"match": {"api": "ApiVersions"}, "action": {"reset_after_bytes": 10}, "trigger": "once"})
        got = b""
        reset = False
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            _api_versions_v0(s)
            try:
                while True:
                    data = s.recv(65536)
                    if not data:
                        break
                    got += data
            except ConnectionResetError:
                reset = True
        assert len(got) <= 10
        assert reset, f"expected a TCP reset, got an orderly close after {len(got)} bytes"
        kp.wait_for_log(r"closed: fault rule 'rst': reset after the configured number of response bytes")
        # once: the next connection is served normally
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            _api_versions_v0(s)
            head = s.recv(8)
            assert len(head) == 8 and struct.unpack(">i", head[4:])[0] == 5
        assert kp.stop() == 0


def test_librdkafka_produces_and_consumes_through_slicer_and_bandwidth_limit(kafka, topic_name):
    """Every exchange sliced into 100-byte writes, both directions limited to 64 KiB/s: 100 records
    of ~1 KiB (a 500-byte key, the value repeats it) still arrive exactly once, and not faster
    than the limit allows."""
    kafka.create_topic(topic_name, partitions=1)
    rate = 64 * 1024
    prefix = "toxic-" + "x" * 494
    payload = sum(2 * len(f"{prefix}{i}") + 3 for i in range(100))
    with ChaosKproxy(kafka.bootstrap(), name="toxics") as kp:
        kp.put_rule("slow-link", {"action": {"bandwidth": rate, "direction": "both"}})
        kp.put_rule("small-writes", {"action": {"slice": 100, "direction": "both"}})
        t0 = time.monotonic()
        prod = clients.rd_produce(kp.bootstrap, topic_name, 100, key_prefix=prefix,
                                  conf={"linger.ms": 20, "compression.type": "none"}, timeout=60)
        produce_s = time.monotonic() - t0
        assert prod["errors"] == [] and prod["delivered"] == 100, prod
        # the record bytes went to the broker through a 64 KiB/s link
        assert produce_s >= payload / rate * 0.9, (produce_s, payload)
        t1 = time.monotonic()
        cons = clients.rd_consume(kp.bootstrap, topic_name, 100, key_prefix=prefix, isolation="read_uncommitted",
                                  timeout=60, linger=0.2)
        consume_s = time.monotonic() - t1
        assert (cons["count"], cons["duplicates"], cons["content_mismatches"]) == (100, 0, 0), cons
        assert consume_s >= payload / rate * 0.9, (consume_s, payload)
        # Both rules act on every exchange, so their counts agree once traffic has stopped; the two
        # admin reads are not atomic together (a late frame may land between them), so read until
        # two snapshots in a row agree.
        deadline = time.monotonic() + 10
        snapshot = None
        while True:
            slow, small = kp.rule("slow-link"), kp.rule("small-writes")
            current = (slow["injected"], small["injected"])
            if current == snapshot or time.monotonic() > deadline:
                break
            snapshot = current
            time.sleep(0.5)
        assert slow["injected"] > 0 and small["injected"] == slow["injected"], (slow, small)
        # the toxics shaped bytes but never broke a connection
        assert "bad request framing" not in kp.log_text() and "bad response framing" not in kp.log_text()
        assert kp.stop() == 0
