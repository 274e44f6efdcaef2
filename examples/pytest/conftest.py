"""A pytest fixture that puts kproxy in front of your test's Kafka broker and lets the test put
fault rules through the admin API (docs/admin-api.openapi.yaml). Copy this file into your suite.

    KPROXY_BIN=/path/to/kproxy KAFKA_BOOTSTRAP=127.0.0.1:9092 pytest examples/pytest

Clients connect to `kproxy.bootstrap` instead of the broker; kproxy rewrites the broker addresses
in Metadata (and the like) so that every connection goes through it. Only the standard library.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest


def _free_port_block(count):
    """The first of `count` consecutive free loopback ports."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count >= 65535:
            continue
        socks = []
        try:
            for p in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port block")


class Kproxy:
    """A running kproxy: `bootstrap` for clients, and the admin API for rules."""

    def __init__(self, binary, upstream, token="example-token"):
        self.port = _free_port_block(1)
        self.broker_ports = _free_port_block(16)   # broker node N is reached at broker_ports + N
        self.admin_port = _free_port_block(1)
        self.token = token
        self.dir = tempfile.mkdtemp(prefix="kproxy-example-")
        config = os.path.join(self.dir, "kproxy.yaml")
        with open(config, "w") as f:
            f.write(f"listeners:\n"
                    f"  - name: test\n"
                    f"    listen: 127.0.0.1:{self.port}\n"
                    f"    upstream: {upstream}\n"
                    f"    advertise: 127.0.0.1\n"
                    f"    broker_ports: {self.broker_ports}\n"
                    f"admin: {{ listen: 127.0.0.1:{self.admin_port}, token_env: EXAMPLE_KPROXY_TOKEN }}\n")
        self.log = open(os.path.join(self.dir, "kproxy.log"), "wb")
        env = {**os.environ, "EXAMPLE_KPROXY_TOKEN": token}
        self.proc = subprocess.Popen([binary, "--config", config], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.call("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kproxy did not start; log in {self.dir}")
            time.sleep(0.1)

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def call(self, method, path, body=None):
        """One admin API call: (status, decoded JSON or None)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.admin_port}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        return status, (json.loads(raw) if raw.strip() else None)

    def put_rule(self, name, rule):
        status, body = self.call("PUT", f"/faults/{name}", rule)
        assert status == 200, body
        return body["rule"]

    def rule(self, name):
        status, body = self.call("GET", f"/faults/{name}")
        assert status == 200, body
        return body

    def reset(self):
        self.call("POST", "/faults/reset")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture(scope="session")
def kafka_bootstrap():
    """Your broker; here from $KAFKA_BOOTSTRAP (a testcontainers Kafka would do as well)."""
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP")
    if not bootstrap:
        pytest.skip("set KAFKA_BOOTSTRAP to a running broker")
    return bootstrap


@pytest.fixture(scope="session")
def kproxy_session(kafka_bootstrap):
    binary = os.environ.get("KPROXY_BIN") or shutil.which("kproxy")
    if not binary:
        pytest.skip("set KPROXY_BIN (or put kproxy on PATH)")
    kp = Kproxy(binary, kafka_bootstrap)
    yield kp
    assert kp.stop() == 0, f"kproxy exited badly; log in {kp.dir}"


@pytest.fixture
def kproxy(kproxy_session):
    """kproxy with no rules at the start of each test (one process for the whole session)."""
    kproxy_session.reset()
    yield kproxy_session
    kproxy_session.reset()
