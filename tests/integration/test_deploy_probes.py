"""Issue #7: kproxy run with the sidecar ConfigMap's config (ports and upstream swapped for loopback
test values) against a real Kafka 4.4 broker, checked the way Kubernetes uses it:

- readiness: /readyz (and deploy/kproxy-probe, the manifests' exec probe) fails while nothing
  answers at the upstream bootstrap, and passes once a broker starts on that very port;
  /healthz passes throughout;
- termination: SIGTERM with a request in flight drains — the client gets its response, kproxy
  exits 0 within drain_timeout (+ slack), /readyz reports 503 while draining.

The broker here is a dedicated one-node harness cluster whose PLAINTEXT port is chosen before it
starts, so kproxy can be pointed at it before it exists.
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="python3-yaml is needed to read the manifests")

import kafka_harness as kh  # noqa: E402
import slowness  # noqa: E402
from test_deploy_manifests import parse_duration  # noqa: E402
from test_proxy_support import LOG_ROOT, free_port_block, kproxy_binary, recv_frame, request  # noqa: E402

REPO = kh.REPO_ROOT
sys.path.insert(0, str(REPO / "deploy" / "k8s"))
import render  # noqa: E402

PROBE = REPO / "deploy" / "kproxy-probe"
FETCH = 1


def binary_has_admin() -> bool:
    try:
        out = subprocess.run([kproxy_binary(), "--help"], capture_output=True, text=True, timeout=10).stdout
    except (RuntimeError, OSError, subprocess.SubprocessError):
        return True  # no binary: let the test fail loudly in start(), not skip
    return "tap" in out  # the admin runtime (#6) came with `kproxy tap`


needs_admin = pytest.mark.skipif(not binary_has_admin(),
                                 reason="the kproxy binary predates the admin server in main (#6): no /healthz /readyz")


def sidecar_config() -> dict:
    docs = render.render(REPO / "deploy" / "k8s" / "base")
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    return yaml.safe_load(cm["data"]["config.yaml"])


class DeployedKproxy:
    """kproxy with the ConfigMap's config; listen/broker/admin ports and upstream made local."""

    def __init__(self, upstream_port: int, name: str):
        cfg = sidecar_config()
        self.drain_timeout = cfg["drain_timeout"]
        (listener,) = cfg["listeners"]
        self.port = kh.free_ports(1)[0]
        listener["listen"] = f"127.0.0.1:{self.port}"
        listener["upstream"] = f"127.0.0.1:{upstream_port}"
        listener["advertise"] = "127.0.0.1"
        listener["broker_ports"] = self.base = free_port_block(8)
        self.admin_port = kh.free_ports(1)[0]
        cfg["admin"]["listen"] = f"127.0.0.1:{self.admin_port}"
        cfg["log"] = {"format": "text", "level": "debug"}
        self.dir = LOG_ROOT / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{name}-{self.port}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.dir / "kproxy.yaml"
        self.config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        self.log_path = self.dir / "kproxy.log"
        self.proc = None

    def start(self) -> "DeployedKproxy":
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([kproxy_binary(), "--config", str(self.config_path)], stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=kh._child_setup)
        deadline = time.monotonic() + slowness.scaled(15)
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"kproxy exited {self.proc.returncode}:\n{self.log()}"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"kproxy did not listen:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def http_status(self, path: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=5)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        finally:
            conn.close()

    def probe(self, path: str) -> int:
        """Exit status of the manifests' exec probe."""
        return subprocess.run([str(PROBE), f"127.0.0.1:{self.admin_port}", path], capture_output=True,
                              timeout=15).returncode

    def wait_status(self, path: str, status: int, timeout: float) -> None:
        timeout = slowness.scaled(timeout)
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                last = self.http_status(path)
                if last == status:
                    return
            except OSError as e:
                last = e
            time.sleep(0.2)
        raise AssertionError(f"{path} never answered {status} within {timeout:.0f}s (last: {last}); log:\n{self.log()[-3000:]}")

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc:
            self._log.close()


@pytest.fixture(scope="module")
def late_port() -> int:
    """The PLAINTEXT port the module's broker will listen on (nothing listens there before)."""
    return kh.free_ports(1)[0]


@pytest.fixture(scope="module")
def late_broker(late_port):
    """A one-node broker started on `late_port` (the harness picks its other ports)."""
    cluster = kh.KafkaCluster(1, name="deploy-late", plaintext_port=late_port)
    cluster.start(timeout=120)
    assert cluster.node(1).ports["PLAINTEXT"] == late_port
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def deployed(request, late_port):
    kp = DeployedKproxy(late_port, name=request.node.name[:40])
    yield kp
    kp.close()


@needs_admin
def test_readyz_fails_until_the_broker_answers_then_passes(deployed, request, late_port):
    kp = deployed.start()
    kp.wait_status("/healthz", 200, 15)
    # Nothing listens at the upstream bootstrap: not ready, but alive (no restart).
    for _ in range(3):
        assert kp.http_status("/readyz") == 503
        assert kp.probe("/readyz") == 1
        assert kp.probe("/healthz") == 0
        time.sleep(0.5)
    cluster = request.getfixturevalue("late_broker")
    assert cluster.node(1).ports["PLAINTEXT"] == late_port
    kp.wait_status("/readyz", 200, 60)
    assert kp.probe("/readyz") == 0
    assert kp.probe("/healthz") == 0
    assert kp.proc.poll() is None


def fetch_v4(topic: str, max_wait_ms: int) -> bytes:
    partitions = struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20)
    topics = struct.pack(">i", 1) + kh._str(topic) + partitions
    return struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0) + topics


def fetch_error(frame_body: bytes) -> int:
    """The first partition's error code in a Fetch v4 response (correlation id first)."""
    r = kh._Buf(frame_body)
    r.int32()  # correlation id
    r.int32()  # throttle_time_ms
    r.int32()  # topics
    r.string()
    r.int32()  # partitions
    r.int32()  # partition index
    return r.int16()


def wait_fetchable(node: kh.KafkaNode, topic: str, timeout: float = 30.0) -> None:
    """Until the broker serves a Fetch of partition 0 without error (a new topic's leader shows in
    Metadata a moment before its replica manager serves it; on a busy machine that moment is long
    enough for a Fetch to be answered at once with NOT_LEADER_OR_FOLLOWER instead of parked)."""
    deadline, err = time.monotonic() + slowness.scaled(timeout), None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((node.host, node.ports["PLAINTEXT"]), timeout=5) as s:
                s.sendall(request(FETCH, 4, 1, fetch_v4(topic, 0)))
                err = fetch_error(recv_frame(s))
            if err == 0:
                return
        except OSError as e:
            err = e
        time.sleep(0.1)
    raise AssertionError(f"partition 0 of {topic} not fetchable: last error {err}")


def test_sigterm_drains_in_flight_request_within_deadline(late_broker, deployed, topic_name):
    late_broker.create_topic(topic_name, partitions=1)
    wait_fetchable(late_broker.node(1), topic_name)
    kp = deployed.start()
    drain = parse_duration(kp.drain_timeout)
    wait_ms = 4000
    with socket.create_connection(("127.0.0.1", kp.port), timeout=30) as s:
        # The broker parks a Fetch on an empty partition for max_wait_ms: a request in flight. It is
        # still unanswered a second later (an answer now would be an error, not a parked Fetch).
        s.sendall(request(FETCH, 4, 4242, fetch_v4(topic_name, wait_ms)))
        answered, _, _ = select.select([s], [], [], 1.0)
        assert not answered, f"the Fetch was answered at once, error code {fetch_error(recv_frame(s))}"
        t0 = time.monotonic()
        kp.proc.send_signal(15)
        if binary_has_admin():
            try:
                assert kp.http_status("/readyz") == 503, "draining kproxy must leave the Service endpoints"
            except OSError:
                pass  # admin already closed: the endpoint is gone too, which is fine
        body = recv_frame(s)
        got = time.monotonic() - t0
        assert struct.unpack(">i", body[:4])[0] == 4242
        assert got >= (wait_ms / 1000.0) - 1.0 - 0.5, "the response came from the broker's parked Fetch"
    rc = kp.proc.wait(timeout=drain + 10)
    elapsed = time.monotonic() - t0
    assert rc == 0, kp.log()[-3000:]
    assert elapsed <= drain + 3, f"drain took {elapsed:.1f}s, drain_timeout is {drain}s"
