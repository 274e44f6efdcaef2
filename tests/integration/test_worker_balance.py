"""Connections spread over the workers (issue #20): the workers share one listening socket, and
whichever loop the kernel wakes accepts; the ConnectionBalancer (proxy/runtime/connection_balancer.h) hands
each accepted connection to the worker that serves the fewest. Checked through the
kproxy_worker_connections{worker} gauge, with every handed-over connection still answered by the
real broker, and the gauges back at 0 once the clients are gone."""

import socket
import struct
import time

import clients
import slowness
from test_chaos_support import ChaosKproxy
from test_proxy_support import recv_frame, request

API_VERSIONS = 18


def _api_versions(sock: socket.socket, correlation_id: int) -> None:
    sock.sendall(request(API_VERSIONS, 0, correlation_id, b""))
    body = recv_frame(sock)
    got_id, error = struct.unpack(">ih", body[:6])
    assert (got_id, error) == (correlation_id, 0)


def _per_worker(kp: ChaosKproxy, workers: int):
    return [kp.metric("kproxy_worker_connections", worker=str(w)) for w in range(workers)]


def test_connections_are_spread_evenly_over_the_workers(kafka, topic_name):
    workers, n = 2, 40
    with ChaosKproxy(kafka.bootstrap(), name="balance", workers=workers) as kp:
        socks = []
        try:
            # A burst, as a client pool opening at start-up makes: the connects all land in the
            # backlog before a loop wakes, and the loop that wakes first accepts every one of them
            # (without the balancer 40 / 0, or close to it).
            for i in range(n):
                socks.append(socket.create_connection(("127.0.0.1", kp.port), timeout=10))
            for i, s in enumerate(socks):
                _api_versions(s, i)
            spread = _per_worker(kp, workers)
            assert sum(spread) == n, spread
            assert max(spread) - min(spread) <= 2, f"connections per worker {spread}"
            # Every connection, handed over or not, still reaches the broker.
            for i, s in enumerate(socks):
                _api_versions(s, 1000 + i)
            handed = kp.metric("kproxy_proxy_connections_handed_over_total")
            assert 0 < handed <= n, handed
        finally:
            for s in socks:
                s.close()
        deadline = time.monotonic() + slowness.scaled(10)
        while time.monotonic() < deadline and sum(_per_worker(kp, workers)) > 0:
            time.sleep(0.05)
        assert _per_worker(kp, workers) == [0.0] * workers
        # A real client through the balanced workers still gets its records in.
        kafka.create_topic(topic_name, partitions=2)
        result = clients.rd_produce(kp.bootstrap, topic_name, 50, timeout=30)
        assert result["delivered"] == 50 and not result["errors"], result
