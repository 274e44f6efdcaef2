"""kproxy's Toxiproxy API (issue #34, docs/toxiproxy.md) driven by real Toxiproxy clients:
toxiproxy-python (PyPI, pinned in scripts/setup, venv .cache/venv-toxiproxy) and
toxiproxy-node-client (npm, pinned in scripts/setup, .cache/node-toxiproxy), in front of a plain
TCP echo server the test starts. The proxy is created at run time through the API, bytes pass
exactly, and the toxics act on the raw bytes: measured latency, a measured bandwidth cap, a reset
(RST), data held by a timeout toxic; disabling the proxy refuses connections, enabling it again
serves them, deleting it frees the port. Every wait is bounded."""

from __future__ import annotations

import glob
import os
import subprocess
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
import json
import urllib.error
import urllib.request

import kafka_harness as kh
import ports
import slowness
from test_proxy_support import Kproxy

VENV = kh.REPO_ROOT / ".cache" / "venv-toxiproxy"


def _client():
    """The toxiproxy-python package from its venv (same interpreter version as the tests)."""
    found = glob.glob(str(VENV / "lib" / "python3*" / "site-packages"))
    if not found or not Path(found[0], "toxiproxy").exists():
        pytest.fail(f"toxiproxy-python is not installed in {VENV}: run scripts/setup")
    if found[0] not in sys.path:
        sys.path.append(found[0])
    import toxiproxy  # noqa: E402
    from toxiproxy.api import APIConsumer  # noqa: E402
    return toxiproxy, APIConsumer


class EchoServer:
    """A TCP echo server on 127.0.0.1 (port from the kernel unless `port`), one thread per connection."""

    def __init__(self, port: int = 0):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.peers = []  # source addresses of the connections accepted
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except socket.timeout:
                continue
            self.peers.append(peer)
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn):
        conn.settimeout(0.1)
        with conn:
            while not self.stop.is_set():
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not data:
                    return
                try:
                    conn.sendall(data)
                except OSError:
                    return

    def close(self):
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=slowness.scaled(5))
    s.settimeout(slowness.scaled(10))
    return s


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def _round_trip(address: str, payload: bytes) -> float:
    with _connect(address) as s:
        t0 = time.monotonic()
        s.sendall(payload)
        assert _read(s, len(payload)) == payload
        return time.monotonic() - t0


@pytest.fixture()
def toxiproxy_kproxy():
    # The Kafka listener's upstream is never dialled here: kproxy connects upstream only when a
    # Kafka client arrives.
    kp = Kproxy("127.0.0.1:9", name="toxi", extra_yaml="toxiproxy: { listen: 127.0.0.1:0, max_proxies: 4 }\n")
    with kp:
        api = kp.wait_bound("toxiproxy", "api")
        yield kp, api


def test_python_client_creates_a_tcp_proxy_and_its_toxics_act_on_raw_bytes(toxiproxy_kproxy):
    kp, api = toxiproxy_kproxy
    toxiproxy, consumer = _client()
    host, port = api.rsplit(":", 1)
    server = toxiproxy.Toxiproxy()
    server.update_api_consumer(host, int(port))
    echo = EchoServer()
    try:
        assert server.running()
        assert b"kproxy" in server.version()
        assert server.proxies() == {}

        proxy = server.create(upstream=f"127.0.0.1:{echo.port}", name="echo", listen="127.0.0.1:0")
        assert proxy.enabled is True
        # The echo server answers the ApiVersions probe with the request itself: not Kafka.
        shown = consumer.get("/proxies/echo").json()
        assert shown["kafka"] is False and "wrong correlation id" in shown["kafka_reason"], shown
        assert len(echo.peers) == 1  # the probe
        echo.peers.clear()
        assert proxy.listen.startswith("127.0.0.1:") and not proxy.listen.endswith(":0")
        with pytest.raises(toxiproxy.exceptions.ProxyExists):
            server.create(upstream=f"127.0.0.1:{echo.port}", name="echo")

        # Exact bytes both ways; the echo server only ever sees kproxy.
        payload = bytes(range(256)) * 64
        with _connect(proxy.listen) as s:
            s.sendall(payload)
            assert _read(s, len(payload)) == payload
        assert len(echo.peers) == 1

        # latency: 400 ms on what comes back.
        proxy.add_toxic(type="latency", attributes={"latency": 400, "jitter": 0})
        assert set(proxy.toxics()) == {"latency_downstream"}
        assert _round_trip(proxy.listen, b"ping") >= 0.39
        proxy.destroy_toxic("latency_downstream")
        assert proxy.toxics() == {}
        assert _round_trip(proxy.listen, b"ping") < slowness.scaled(0.3)

        # bandwidth: 200 KB/s, 200 000 bytes take about a second.
        proxy.add_toxic(type="bandwidth", attributes={"rate": 200})
        big = b"k" * 200_000
        elapsed = _round_trip(proxy.listen, big)
        assert elapsed >= 0.9, elapsed
        proxy.destroy_toxic("bandwidth_downstream")

        # reset_peer: the connection is reset (RST) after 100 ms.
        proxy.add_toxic(type="reset_peer", attributes={"timeout": 100})
        with _connect(proxy.listen) as s:
            with pytest.raises(ConnectionResetError):
                data = s.recv(10)
                raise AssertionError(f"no reset: recv gave {data!r}")  # a FIN gives b""
        proxy.destroy_toxic("reset_peer_downstream")

        # timeout 0 on the upstream stream: nothing passes until the toxic is removed.
        proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
        with _connect(proxy.listen) as s:
            s.sendall(b"held")
            s.settimeout(0.5)
            with pytest.raises(socket.timeout):
                s.recv(4)
            proxy.destroy_toxic("timeout_upstream")
            s.settimeout(slowness.scaled(5))
            assert _read(s, 4) == b"held"

        # Disabled: connections refused; enabled again: served. /reset clears toxics.
        proxy.disable()
        with pytest.raises(ConnectionRefusedError):
            _connect(proxy.listen).close()
        proxy.enable()
        assert _round_trip(proxy.listen, b"back") < slowness.scaled(1)
        proxy.add_toxic(type="latency", attributes={"latency": 1000})
        assert server.reset()
        assert proxy.toxics() == {}

        # Bad toxics get the client's InvalidToxic (400); unknown names NotFound (404).
        with pytest.raises(toxiproxy.exceptions.InvalidToxic):
            proxy.add_toxic(type="no_such_toxic")
        with pytest.raises(toxiproxy.exceptions.NotFound):
            proxy.destroy_toxic("nope")

        # Deleted: the port is free again.
        listen = proxy.listen
        assert server.destroy(proxy)
        assert server.proxies() == {}
        with pytest.raises(ConnectionRefusedError):
            _connect(listen).close()
    finally:
        echo.close()


def _call(base: str, method: str, path: str, body=None):
    """(status, JSON body or None) of one request to the Toxiproxy API."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=slowness.scaled(10)) as r:
            text = r.read()
            return r.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, (json.loads(text) if text else None)


def test_api_answers_in_toxiproxy_shapes_and_statuses(toxiproxy_kproxy):
    kp, api = toxiproxy_kproxy
    base = f"http://{api}"
    status, body = _call(base, "POST", "/proxies", {"name": "a", "upstream": "127.0.0.1:9", "listen": "127.0.0.1:0"})
    assert status == 201
    # Toxiproxy's fields, and kproxy's extension fields (docs/toxiproxy.md).
    assert set(body) == {"name", "listen", "upstream", "enabled", "toxics", "kafka", "kafka_reason", "relay"}
    # Nothing listens at the upstream: probed again at the first connection.
    assert body["kafka"] is False and body["kafka_reason"].startswith("the upstream was not up when probed (connect"), body
    status, body = _call(base, "POST", "/proxies/a/toxics", {"type": "slicer", "attributes": {"average_size": 10}})
    assert status == 200
    assert body == {"attributes": {"average_size": 10, "size_variation": 0, "delay": 0}, "name": "slicer_downstream",
                    "type": "slicer", "stream": "downstream", "toxicity": 1.0}
    assert _call(base, "GET", "/proxies/nope") == (404, {"error": "proxy not found", "status": 404})
    assert _call(base, "POST", "/proxies", {"name": "b"}) == (400, {"error": "missing required field: upstream", "status": 400})
    status, body = _call(base, "POST", "/populate", [{"name": "b", "upstream": "127.0.0.1:9"}, {"name": "c", "upstream": "127.0.0.1:9"}])
    assert status == 201
    assert [p["name"] for p in body["proxies"]] == ["b", "c"]
    assert _call(base, "POST", "/proxies", {"name": "d", "upstream": "127.0.0.1:9"})[0] == 201  # max_proxies: 4
    status, body = _call(base, "POST", "/proxies", {"name": "e", "upstream": "127.0.0.1:9"})
    assert status == 409 and "max_proxies" in body["error"]
    assert _call(base, "DELETE", "/proxies/a/toxics/slicer_downstream") == (204, None)
    assert _call(base, "POST", "/reset") == (204, None)
    assert sorted(_call(base, "GET", "/proxies")[1]) == ["a", "b", "c", "d"]


def test_an_upstream_down_at_creation_is_probed_at_the_first_connection_and_stays_tcp(toxiproxy_kproxy):
    """Issue #34: the upstream is not up when the proxy is created; an echo server (no Kafka)
    starts there afterwards; the first connection triggers the ApiVersions probe, which finds no
    Kafka: GET /proxies says so, and that very connection is relayed byte for byte."""
    kp, api = toxiproxy_kproxy
    base = f"http://{api}"
    upstream_port = ports.free_port()
    status, body = _call(base, "POST", "/proxies", {"name": "late", "upstream": f"127.0.0.1:{upstream_port}", "listen": "127.0.0.1:0"})
    assert status == 201, body
    assert body["kafka"] is False and body["relay"] == "tcp", body
    assert body["kafka_reason"] == ("the upstream was not up when probed (connect: Connection refused): "
                                    "probed again at the first connection"), body
    listen = body["listen"]
    echo = EchoServer(upstream_port)
    try:
        payload = os.urandom(4096)
        assert _round_trip(listen, payload) >= 0  # the held first connection goes on once the probe decided
        shown = _call(base, "GET", "/proxies")[1]["late"]
        assert shown["kafka"] is False and shown["relay"] == "tcp", shown
        assert shown["kafka_reason"] == ("probe at first connection: the upstream did not answer ApiVersions: "
                                         "answer with a wrong correlation id"), shown
        # Decided: later connections are not probed again (no new ApiVersions reaches the echo).
        probes = len(echo.peers)
        assert _round_trip(listen, b"again") >= 0
        assert len(echo.peers) == probes + 1
    finally:
        echo.close()
    assert _call(base, "DELETE", "/proxies/late") == (204, None)


NODE_MODULES = kh.REPO_ROOT / ".cache" / "node-toxiproxy" / "node_modules"
NODE_DRIVER = Path(__file__).resolve().parent / "toxiproxy_node" / "driver.js"


def test_node_client_creates_a_tcp_proxy_and_its_toxics_act_on_raw_bytes(toxiproxy_kproxy):
    kp, api = toxiproxy_kproxy
    if not (NODE_MODULES / "toxiproxy-node-client").exists():
        pytest.fail(f"toxiproxy-node-client is not installed in {NODE_MODULES}: run scripts/setup")
    echo = EchoServer()
    try:
        run = subprocess.run(["node", str(NODE_DRIVER), f"http://{api}", f"127.0.0.1:{echo.port}"], capture_output=True, text=True,
                             timeout=slowness.scaled(60), env={**os.environ, "NODE_PATH": str(NODE_MODULES)})
        assert run.returncode == 0, run.stdout + run.stderr
        seen = json.loads(run.stdout.strip().splitlines()[-1])
    finally:
        echo.close()
    assert "kproxy" in seen["version"]
    assert seen["listen"].startswith("127.0.0.1:") and not seen["listen"].endswith(":0")
    assert seen["plain"]["data"] == "hello"
    assert seen["latency_name"] == "latency_downstream"
    assert seen["latency"]["data"] == "slow" and seen["latency"]["ms"] >= 290, seen
    assert seen["after_latency"]["data"] == "fast" and seen["after_latency"]["ms"] < slowness.scaled(250), seen
    assert seen["reset"] == {"error": "ECONNRESET"}, seen
    assert "400" in seen["bad_toxic"], seen
    assert seen["disabled_enabled"] is False
    assert seen["while_disabled"] == {"error": "ECONNREFUSED"}, seen
    assert seen["reenabled"]["data"] == "again"
    assert seen["proxies_after"] == []
