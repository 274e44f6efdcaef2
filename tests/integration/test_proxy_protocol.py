"""PROXY protocol v2 in front of kproxy (issue #33): a real HAProxy with `send-proxy-v2` between
the client and a `proxy_protocol: v2` listener, in front of a real Kafka 4.4 broker. kproxy reads
the load balancer's header before anything else, names the real client in its log and its tap,
and refuses (with a log line and kproxy_proxy_proxy_header_refusals_total) a connection that
comes without a valid header: a direct client, HAProxy's version 1 header, a header that never
ends. A listener that does not ask for the header never takes one."""

import socket
import struct
import time

import kafka_harness as kh
from haproxy_tcp import start_haproxy_tcp
import slowness
from test_chaos_support import ChaosKproxy
from test_observability_metrics import _TapReader
from test_proxy_support import Kproxy, connection_closed, recv_frame, request, stop_process


def _haproxy(tmp_path, kproxy_port, send_proxy="send-proxy-v2"):
    """HAProxy in TCP mode on a free port, forwarding to kproxy with `send_proxy`."""
    port = kh.free_ports(1)[0]
    proc = start_haproxy_tcp(tmp_path / f"haproxy-{send_proxy}.cfg", port, maxconn=100,
                             backend=f"  server kproxy 127.0.0.1:{kproxy_port} {send_proxy}\n")
    return proc, port


def _api_versions(sock, cid):
    sock.sendall(request(18, 0, cid, b""))
    frame = recv_frame(sock)
    return struct.unpack(">i", frame[:4])[0]


def test_a_client_through_haproxy_is_named_and_the_rest_refused(kafka, tmp_path):
    kp = ChaosKproxy(kafka.bootstrap(), name="pp", listener_yaml="    proxy_protocol: v2\n",
                     limits={"proxy_header_timeout": "1s"}, log_level="info")
    with kp:
        haproxy, front = _haproxy(tmp_path, kp.port)
        tap = _TapReader(kp.admin_port, "?api=ApiVersions")
        tap.start()
        assert tap.connected.wait(10)
        try:
            before = kp.metric("kproxy_proxy_proxy_header_refusals_total")
            # Through HAProxy: the header is read, the Kafka bytes after it are served.
            with socket.create_connection(("127.0.0.1", front), timeout=10) as c:
                client = "127.0.0.1:%d" % c.getsockname()[1]
                assert _api_versions(c, 41) == 41
                assert _api_versions(c, 42) == 42
            kp.wait_for_log(rf"client {client} through 127\.0\.0\.1:\d+ \(PROXY protocol v2\)")
            deadline = time.monotonic() + slowness.scaled(10)
            while not any(l.get("client_address") == client for l in tap.lines) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert any(l.get("client_address") == client and l.get("correlation_id") == 41 for l in tap.lines), tap.lines[-5:]

            # A client that connects directly: refused at its first bytes.
            with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as direct:
                direct.sendall(request(18, 0, 7, b""))
                assert connection_closed(direct, 10)
            kp.wait_for_log(r"no PROXY protocol v2 signature in the first bytes \(a client connecting directly")
            assert kp.metric("kproxy_proxy_proxy_header_refusals_total") - before == 1

            # HAProxy sending version 1 (the text form): refused, and said so.
            v1, v1_front = _haproxy(tmp_path, kp.port, "send-proxy")
            try:
                with socket.create_connection(("127.0.0.1", v1_front), timeout=10) as c:
                    c.sendall(request(18, 0, 8, b""))
                    assert connection_closed(c, 10)
            finally:
                stop_process(v1)
            kp.wait_for_log(r"PROXY protocol version 1 \(text\) header: this listener takes version 2")

            # Half a header, then nothing: closed by limits.proxy_header_timeout.
            with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as slow:
                slow.sendall(b"\r\n\r\n\x00\r\nQU")
                assert connection_closed(slow, slowness.scaled(10))
            kp.wait_for_log(r"no PROXY protocol header within 1000 ms \(limits.proxy_header_timeout\)")

            # The version 1 connections count too (HAProxy's own readiness probe may add one), and
            # so does the header that never came.
            assert kp.metric("kproxy_proxy_proxy_header_refusals_total") - before >= 3
            assert kp.metric("kproxy_proxy_wait_deadlines_total") == 0
            # Other connections untouched: one more through HAProxy is served.
            with socket.create_connection(("127.0.0.1", front), timeout=10) as c:
                assert _api_versions(c, 43) == 43
        finally:
            tap.stop()
            stop_process(haproxy)
        assert kp.alive()


def test_a_listener_without_proxy_protocol_never_takes_a_header(kafka, tmp_path):
    # A client could otherwise forge its address: the header is just bad Kafka framing here.
    with Kproxy(kafka.bootstrap(), name="no-pp", log_level="info") as kp:
        haproxy, front = _haproxy(tmp_path, kp.port)
        try:
            with socket.create_connection(("127.0.0.1", front), timeout=10) as c:
                c.sendall(request(18, 0, 9, b""))
                assert connection_closed(c, 10)
        finally:
            stop_process(haproxy)
        kp.wait_for_log(r"bad request framing")
        assert "PROXY protocol v2" not in kp.log_text()
