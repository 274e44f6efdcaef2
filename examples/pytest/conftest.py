"""A pytest fixture that puts kproxy in front of your test's Kafka broker and lets the test put
fault rules through the admin API (docs/admin-api.openapi.yaml). Copy this file into your suite.

    KPROXY_BIN=/path/to/kproxy KAFKA_BOOTSTRAP=127.0.0.1:9092 pytest examples/pytest

Clients connect to `kproxy.bootstrap` instead of the broker; kproxy rewrites the broker addresses
in Metadata (and the like) so that every connection goes through it. Only the standard library.
"""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest


class Kproxy:
    """A running kproxy: `bootstrap` for clients, and the admin API for rules."""

    def __init__(self, binary, upstream, token="example-token"):
        self.token = token
        self.dir = tempfile.mkdtemp(prefix="kproxy-example-")
        config = os.path.join(self.dir, "kproxy.yaml")
        with open(config, "w") as f:
            f.write(f"listeners:\n"
                    f"  - name: test\n"
                    f"    listen: 127.0.0.1:0\n"      # port 0 everywhere: the kernel picks,
                    f"    upstream: {upstream}\n"     # kproxy says what it bound
                    f"    advertise: 127.0.0.1\n"
                    f"    broker_ports: 0\n"
                    f"admin: {{ listen: 127.0.0.1:0, token_env: EXAMPLE_KPROXY_TOKEN }}\n")
        self.log = open(os.path.join(self.dir, "kproxy.log"), "wb")
        env = {**os.environ, "EXAMPLE_KPROXY_TOKEN": token}
        # Standard output carries only the "kproxy bound" lines; the log goes to standard error.
        self.proc = subprocess.Popen([binary, "--config", config], stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.bound = {}  # (KIND, LABEL) -> "HOST:PORT", e.g. ("broker", "test/node-1")
        self._bound_changed = threading.Condition()
        threading.Thread(target=self._follow_bound_lines, daemon=True).start()
        deadline = time.monotonic() + 20
        self.bootstrap = self.wait_bound("listener", "test", deadline)
        self.admin = self.wait_bound("admin", "api", deadline)
        while True:
            try:
                if self.call("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kproxy did not start; log in {self.dir}")
            time.sleep(0.1)

    def _follow_bound_lines(self):
        # kproxy binds port 0 (the kernel picks free ports: nothing to probe, nothing to race)
        # and prints one "kproxy bound KIND LABEL HOST:PORT" line per socket on standard output.
        for raw in self.proc.stdout:
            parts = raw.decode(errors="replace").split()
            if len(parts) == 5 and parts[:2] == ["kproxy", "bound"]:
                with self._bound_changed:
                    self.bound[(parts[2], parts[3])] = parts[4]
                    self._bound_changed.notify_all()
        with self._bound_changed:
            self._bound_changed.notify_all()  # standard output closed: kproxy exited

    def wait_bound(self, kind, label, deadline):
        """The address kproxy reported for (kind, label), waiting for it until `deadline`."""
        with self._bound_changed:
            while (kind, label) not in self.bound:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise RuntimeError(f"kproxy reported no {kind} {label}; log in {self.dir}")
                self._bound_changed.wait(min(left, 0.5))
            return self.bound[(kind, label)]

    def call(self, method, path, body=None):
        """One admin API call: (status, decoded JSON or None)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://{self.admin}{path}", data=data, method=method,
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
