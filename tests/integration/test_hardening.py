"""Hostile and careless peers on the data plane (issue #15): each test reproduces one finding
against a real Kafka 4.4 broker and checks what kproxy does now."""

import re
import socket
import struct
import subprocess
import time

import pytest

import kafka_harness as kh

from test_chaos_support import ChaosKproxy
from test_proxy_support import Kproxy, compact_str, kproxy_binary, recv_frame, request


def _all_bytes_after_half_close(host, port, payload, timeout=10.0):
    """Sends `payload`, half-closes (SHUT_WR) and returns every byte the peer sends before it closes."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
        return out


def test_half_close_after_requests_still_gets_every_answer(kafka):
    # Bug 7: ApiVersions v0 then shutdown(SHUT_WR). Kafka answers and then closes; kproxy used to
    # close at the client's EOF with 0 bytes sent.
    host, port = kafka.bootstrap().split(":")
    payload = request(18, 0, 7, b"") + request(18, 0, 8, b"")
    direct = _all_bytes_after_half_close(host, int(port), payload)
    assert len(direct) > 8, "the broker itself answers a half-closed client"
    with Kproxy(kafka.bootstrap(), name="halfclose") as kp:
        through = _all_bytes_after_half_close("127.0.0.1", kp.port, payload)
        # Two whole responses, in order, with the correlation ids of the requests.
        first_size = struct.unpack(">i", through[:4])[0]
        assert struct.unpack(">i", through[4:8])[0] == 7
        second = through[4 + first_size:]
        assert struct.unpack(">i", second[4:8])[0] == 8
        assert len(through) == len(direct), (len(through), len(direct))
        # Which line depends on the order the loop saw the client's EOF and the broker's answers
        # in (on a busy machine both answers can be out before the EOF is read): either way every
        # request was answered and the close is the client's.
        kp.wait_for_log(r"(client closed its side after 2 requests; every request was answered"
                        r"|client closed the connection) \[client_closed\] \(client [^,]+, 2 requests, 0 awaiting")


def _wait_no_client_connections(kp, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and kp.metric("kproxy_connections", side="client") > 0:
        time.sleep(0.05)
    assert kp.metric("kproxy_connections", side="client") == 0


def _api_versions_v3(correlation_id, software_name, software_version):
    body = compact_str(software_name) + compact_str(software_version) + b"\x00"
    return request(18, 3, correlation_id, body, flexible=True)


def test_a_connection_counts_once_in_kproxy_clients_under_its_latest_name(kafka):
    # Bug 8: franz-go's admin client announces "kadm" on connections that announced "kgo"; the
    # gauge kept one "kgo" per connection for ever.
    with ChaosKproxy(kafka.bootstrap(), name="clients") as kp:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
                for cid, name in ((1, "kgo"), (2, "kgo"), (3, "kadm")):
                    s.sendall(_api_versions_v3(cid, name, "1.2.3"))
                    assert struct.unpack(">i", recv_frame(s)[:4])[0] == cid
                assert kp.metric("kproxy_clients", software_name="kgo") == 0
                assert kp.metric("kproxy_clients", software_name="kadm") == 1
        _wait_no_client_connections(kp)
        assert kp.metric("kproxy_clients", software_name="kgo") == 0
        assert kp.metric("kproxy_clients", software_name="kadm") == 0


def test_kproxy_pointed_at_itself_refuses_at_once_and_says_why():
    # Bug 5: a broker address that is kproxy's own (a broker advertising the proxy) made kproxy
    # connect to itself in a loop: 65 client attempts made 19,448 accepted connections. Here the
    # listener's upstream is its own port: every client attempt must cost one accepted
    # connection, be refused, and be explained in the log.
    kp = ChaosKproxy("127.0.0.1:1", name="selfloop", port=kh.free_ports(1)[0])  # its own upstream: known before start
    kp.upstream = f"127.0.0.1:{kp.port}"
    kp.config_text = kp.config_text.replace("upstream: 127.0.0.1:1\n", f"upstream: 127.0.0.1:{kp.port}\n")
    kp.config_path.write_text(kp.config_text)
    with kp:
        _wait_no_client_connections(kp)  # start() probed the port with a connection of its own
        self_before = kp.metric("kproxy_proxy_self_connections_total")
        accepted_before = kp.metric("kproxy_proxy_connections_accepted_total")
        closed_before = kp.metric("kproxy_connections_closed_total", reason="self_connection")
        attempts = 20
        for _ in range(attempts):
            with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
                s.sendall(request(18, 0, 1, b""))
                s.settimeout(10)
                try:
                    assert s.recv(65536) == b""  # closed without an answer
                except ConnectionResetError:
                    pass
        kp.wait_for_log(r"kproxy is connecting to itself .*advertised\.listeners")
        _wait_no_client_connections(kp)
        assert kp.metric("kproxy_proxy_self_connections_total") - self_before == attempts
        assert kp.metric("kproxy_proxy_connections_accepted_total") - accepted_before == attempts  # no second connection
        assert kp.metric("kproxy_connections_closed_total", reason="self_connection") - closed_before == attempts
        assert kp.alive()


def test_a_broker_advertising_kproxys_broker_port_gets_no_port_and_one_log_line():
    # Issue #46 item 3: a broker whose advertised.listeners name kproxy's own broker port for it
    # (node 1 at base + 1) made kproxy accept 89 connections from one retrying client in 8 s and
    # write 188 log lines, none naming the loop. Now kproxy opens no port for that node and says
    # why once; a retrying librdkafka client costs only its bootstrap connections.
    confluent_kafka = pytest.importorskip("confluent_kafka")
    kp = ChaosKproxy("127.0.0.1:1", name="advloop", broker_ports="block")
    loop_port = kp.base + 1
    cluster = kh.KafkaCluster(1, advertise={1: ("127.0.0.1", loop_port)}, name="advloop")
    cluster.start()
    try:
        kp.upstream = cluster.bootstrap()
        kp.config_text = kp.config_text.replace("upstream: 127.0.0.1:1\n", f"upstream: {kp.upstream}\n")
        kp.config_path.write_text(kp.config_text)
        with kp:
            _wait_no_client_connections(kp)  # start() probed the port with a connection of its own
            accepted_before = kp.metric("kproxy_proxy_connections_accepted_total")
            # The client is told node 1 is at kproxy's port for it, as for any broker ...
            meta = kh.metadata("127.0.0.1", kp.port, (), timeout=10)
            assert meta.brokers == {1: ("127.0.0.1", loop_port)}, meta.brokers
            kp.wait_for_log(rf"opens no port for broker node 1: the broker advertises 127\.0\.0\.1:{loop_port}, which is kproxy "
                            r"itself \(the brokers' advertised\.listeners must name the brokers")
            # ... but nothing listens there: the loop never starts.
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", loop_port), timeout=5).close()
            # A librdkafka producer retrying for a bounded time: every connection it makes to
            # kproxy is a bootstrap connection, none comes back from kproxy itself.
            producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{kp.port}", "message.timeout.ms": 4000,
                                                "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
                                                "socket.connection.setup.timeout.ms": 1000})
            failed = []
            producer.produce("advloop", b"v", on_delivery=lambda err, msg: failed.append(err))
            producer.flush(10)
            assert len(failed) == 1 and failed[0] is not None, failed  # nothing could be delivered: the broker is unreachable
            accepted = kp.metric("kproxy_proxy_connections_accepted_total") - accepted_before
            print(f"\n[advloop] one librdkafka producer for ~5 s: {accepted:.0f} connections accepted, "
                  f"{len(kp.log_text().splitlines())} log lines")
            assert 1 <= accepted <= 12, f"{accepted} connections accepted from one client in about 5 s"
            loop_lines = re.findall(r"opens no port for broker node 1", kp.log_text())
            assert len(loop_lines) == 1, loop_lines  # named once, however often responses name the node
            assert kp.metric("kproxy_proxy_self_connections_total") >= 1
            assert kp.alive()
    finally:
        cluster.stop()


def test_a_second_process_cannot_take_a_share_of_a_listener_port(kafka):
    # Bug 6: with SO_REUSEPORT a second kproxy (or any process of the same user) could bind the
    # same listen address and take a share of the connections (of 40, one got 18 and the other
    # 22), and it logged nothing. Now the address is bound once per process: the second fails.
    with ChaosKproxy(kafka.bootstrap(), name="first", workers=2) as first:
        _wait_no_client_connections(first)  # start() probed the port with a connection of its own
        accepted_before = first.metric("kproxy_proxy_connections_accepted_total")
        second = Kproxy(kafka.bootstrap(), name="second")
        second.config_text = second.config_text.replace(f"listen: 127.0.0.1:{second.port}\n", f"listen: 127.0.0.1:{first.port}\n")
        second.config_path.write_text(second.config_text)
        run = subprocess.run([kproxy_binary(), "--config", str(second.config_path)], capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
        assert run.returncode == 1, run.stdout + run.stderr
        assert re.search(rf"cannot start: listener 'second': cannot listen on 127\.0\.0\.1:{first.port}: address already in use",
                         run.stdout + run.stderr), run.stdout + run.stderr
        # Every connection is the first kproxy's.
        for cid in range(40):
            with socket.create_connection(("127.0.0.1", first.port), timeout=10) as s:
                s.sendall(request(18, 0, cid, b""))
                assert struct.unpack(">i", recv_frame(s)[:4])[0] == cid
        _wait_no_client_connections(first)
        assert first.metric("kproxy_proxy_connections_accepted_total") - accepted_before == 40


def test_http_on_a_kafka_port_is_named_in_the_log(kafka):
    # Weak spot: "GET " read as a size prefix was reported only as "frame size 1195725856 exceeds
    # the limit"; the log now says what the bytes look like.
    with Kproxy(kafka.bootstrap(), name="http") as kp:
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: kproxy\r\n\r\n")
            s.settimeout(10)
            assert s.recv(65536) == b""
        kp.wait_for_log(r"bad request framing: HTTP request bytes on a Kafka port \(an HTTP client or health check connected to a "
                        r"Kafka listener\) \(frame size 1195725856 exceeds the limit")


def test_partial_frames_of_all_connections_are_capped(kafka):
    # Weak spot: 16 connections x 16 MiB of partial frames cost +448 MB. limits.max_buffered_frame_bytes
    # caps them; since issue #46 nobody is closed for it: kproxy stops reading the connections
    # holding the most (above 1 MiB each), and a normal client is served beside them.
    limits = {"max_request_frame_bytes": "4MiB", "max_response_frame_bytes": "4MiB", "max_buffered_frame_bytes": "10MiB"}
    with ChaosKproxy(kafka.bootstrap(), name="framecap", limits=limits) as kp:
        start = struct.pack(">i", 4 << 20) + b"\x00" * ((3 << 20) - 4)  # 3 MiB of a 4 MiB frame
        held = []
        try:
            for _ in range(4):  # 12 MiB: over the 10 MiB budget
                s = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
                s.setblocking(False)
                held.append([s, start])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and kp.metric("kproxy_proxy_reads_paused", reason="frame_memory") < 1:
                for h in held:
                    if h[1]:
                        try:
                            h[1] = h[1][h[0].send(h[1]):]
                        except BlockingIOError:
                            pass
                time.sleep(0.05)
            kp.wait_for_log(r"reads paused: partial frames of all connections hold \d+ bytes, more than 10485760 "
                            r"\(limits\.max_buffered_frame_bytes\), and this one holds \d+ bytes of a request \d+ bytes short of whole")
            assert kp.metric("kproxy_proxy_reads_paused", reason="frame_memory") >= 1
            assert kp.metric("kproxy_proxy_reads_paused_total", reason="frame_memory") >= 1
            assert kp.metric("kproxy_proxy_frame_memory_refusals_total") == 0
            # A normal client is served.
            with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as ok:
                ok.sendall(request(18, 0, 3, b""))
                assert struct.unpack(">i", recv_frame(ok)[:4])[0] == 3
            # Nobody was closed.
            for s, _ in held:
                try:
                    assert s.recv(1) != b""  # EOF would mean kproxy closed it
                except BlockingIOError:
                    pass
        finally:
            for s, _ in held:
                s.close()
