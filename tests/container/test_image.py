"""Issue #17: the kproxy image built from deploy/Dockerfile (tests/container/build-image), run with
podman as Kubernetes runs the sidecar — read-only root filesystem, every capability dropped, no
new privileges, the manifests' user 10001:10001, the ConfigMap's config mounted read-only at
/etc/kproxy the way the kubelet lays out a configMap volume — against a real Kafka 4.4 broker:

- the image: non-root numeric USER, HEALTHCHECK kept (docker format), only the binary, its
  runtime libraries, CA certificates and the probe added to the slim base, under 100 MB;
- HEALTHCHECK (podman healthcheck run) passes with kproxy up, fails with a wrong admin address;
- /readyz 503 (exec probe exit 1) while nothing answers at the upstream, 200 once a broker is there;
- a Java transactional producer and a read_committed consumer through the container (1,000
  records in 10 transactions, read back exactly once); Metadata shows only its advertised addresses;
- SIGTERM with a Fetch in flight: the response arrives, exit code 0, within drain_timeout.

Networking: --network host (never podman's bridge network, which would change the machine's
network setup), so each container gets free loopback ports in place of the ConfigMap's fixed ones.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional

import pytest
import yaml

from conftest import CONTAINER_PREFIX, IMAGE, LOGS, PODMAN, ROOT

import clients  # noqa: E402
import kafka_harness as kh  # noqa: E402

sys.path.insert(0, str(ROOT / "deploy" / "k8s"))
import render  # noqa: E402

UID = 10001
FETCH = 1
SIZE_LIMIT = 100_000_000


def podman(*args, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
    out = subprocess.run([str(PODMAN), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check:
        assert out.returncode == 0, f"podman {' '.join(map(str, args))}: exit {out.returncode}\n{out.stdout}{out.stderr}"
    return out


def parse_duration(text) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(text))
    assert m, f"not a duration: {text!r}"
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def free_port_block(count: int) -> int:
    """base .. base+count-1 free now and reserved for this process, outside the ephemeral range
    (tests/integration/ports.py), so a concurrent test run cannot take a broker port."""
    import ports
    return ports.port_block(count)


def kafka_request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    msg = struct.pack(">hhi", api_key, version, correlation_id) + kh._str("kproxy-container-test") + body
    return struct.pack(">i", len(msg)) + msg


def recv_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", kh._recv_exact(sock, 4))[0]
    return kh._recv_exact(sock, size)


def sidecar_configmap() -> Dict:
    (cm,) = [d for d in render.render(ROOT / "deploy" / "k8s" / "base") if d["kind"] == "ConfigMap"]
    return cm


class KproxyContainer:
    """The image run the way the sidecar manifests run it; ports and upstream made local."""

    def __init__(self, upstream_port: int, name: str, env: Optional[Dict[str, str]] = None):
        self.name = f"{CONTAINER_PREFIX}-{name}-{uuid.uuid4().hex[:6]}"
        cfg = yaml.safe_load(sidecar_configmap()["data"]["config.yaml"])
        self.drain_timeout = parse_duration(cfg.get("drain_timeout", "30s"))
        (listener,) = cfg["listeners"]
        self.advertise = listener["advertise"]
        self.port = kh.free_ports(1)[0]
        listener["listen"] = f"127.0.0.1:{self.port}"
        listener["upstream"] = f"127.0.0.1:{upstream_port}"
        listener["broker_ports"] = self.base = free_port_block(8)
        self.admin_port = kh.free_ports(1)[0]
        cfg["admin"]["listen"] = f"127.0.0.1:{self.admin_port}"
        self.env = {"KPROXY_ADMIN_ADDR": cfg["admin"]["listen"], **(env or {})}
        self.dir = LOGS / self.name
        self.config_dir = self.dir / "configmap"
        self._write_configmap_volume(yaml.safe_dump(cfg, sort_keys=False))
        self.started = False

    def _write_configmap_volume(self, text: str) -> None:
        """The kubelet's layout of a configMap volume: a timestamped folder, ..data pointing at
        it, and config.yaml a symlink through ..data; files 0644, everything root-owned."""
        stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.000000001")
        (self.config_dir / stamp).mkdir(parents=True)
        (self.config_dir / stamp / "config.yaml").write_text(text)
        os.symlink(stamp, self.config_dir / "..data")
        os.symlink("..data/config.yaml", self.config_dir / "config.yaml")
        for p in [self.dir, self.config_dir, self.config_dir / stamp]:
            os.chmod(p, 0o755)
        os.chmod(self.config_dir / stamp / "config.yaml", 0o644)
        # uid 10001 must be able to reach the mount source's parents
        p = self.dir.parent
        while p != p.parent and p != ROOT.parent:
            os.chmod(p, os.stat(p).st_mode | 0o005)
            p = p.parent

    def start(self, wait_listen: bool = True) -> "KproxyContainer":
        args = ["run", "--detach", "--name", self.name,
                "--network", "host",
                "--read-only", "--read-only-tmpfs=false",
                "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "--user", f"{UID}:{UID}",
                "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096",
                "--volume", f"{self.config_dir}:/etc/kproxy:ro"]
        for k, v in self.env.items():
            args += ["--env", f"{k}={v}"]
        podman(*args, IMAGE, check=True)
        self.started = True
        if wait_listen:
            self.wait_listening()
        return self

    def state(self) -> Dict:
        out = podman("inspect", "--format", "json", self.name)
        return json.loads(out.stdout)[0]["State"] if out.returncode == 0 else {}

    def running(self) -> bool:
        return bool(self.state().get("Running"))

    def logs(self) -> str:
        out = podman("logs", self.name)
        return (out.stdout + out.stderr)[-6000:]

    def wait_listening(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.running(), f"kproxy container exited: {self.state()}\n{self.logs()}"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"kproxy in {self.name} did not listen on {self.port}:\n{self.logs()}")

    def http_status(self, path: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=5)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        finally:
            conn.close()

    def wait_status(self, path: str, status: int, timeout: float) -> None:
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                last = self.http_status(path)
                if last == status:
                    return
            except OSError as e:
                last = e
            time.sleep(0.2)
        raise AssertionError(f"{path} never answered {status} in {timeout}s (last: {last}):\n{self.logs()}")

    def exec_probe(self, path: str) -> subprocess.CompletedProcess:
        """The manifests' exec probe, run inside the container as the kubelet runs it."""
        return podman("exec", self.name, "/usr/local/bin/kproxy-probe", f"127.0.0.1:{self.admin_port}", path)

    def healthcheck(self) -> subprocess.CompletedProcess:
        return podman("healthcheck", "run", self.name)

    def remove(self) -> None:
        if self.started:
            (self.dir / "container.log").write_text(self.logs())
            podman("rm", "--force", "--time", "0", self.name)
            self.started = False


@pytest.fixture(scope="module")
def image() -> Dict:
    out = podman("image", "inspect", IMAGE)
    assert out.returncode == 0, f"no image {IMAGE}: run tests/container/build-image\n{out.stderr}"
    return json.loads(out.stdout)[0]


@pytest.fixture(scope="module")
def upstream_port() -> int:
    """The PLAINTEXT port the module's broker will listen on; nothing listens there before."""
    return kh.free_ports(1)[0]


@pytest.fixture(scope="module")
def broker(upstream_port):
    """A one-node Kafka 4.4 broker from the harness, started on `upstream_port`."""
    cluster = kh.KafkaCluster(1, name="container", log_root=LOGS / f"kafka-{uuid.uuid4().hex[:6]}", plaintext_port=upstream_port)
    cluster.start(timeout=180)
    assert cluster.node(1).ports["PLAINTEXT"] == upstream_port
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def containers():
    made: List[KproxyContainer] = []

    def make(upstream_port: int, name: str, **kw) -> KproxyContainer:
        c = KproxyContainer(upstream_port, name, **kw)
        made.append(c)
        return c
    yield make
    for c in made:
        c.remove()


@pytest.fixture
def topic_name(request) -> str:
    return f"{re.sub(r'[^A-Za-z0-9._-]', '-', request.node.name)[:60]}-{uuid.uuid4().hex[:6]}"


# ---------------------------------------------------------------------------------------------
# the image itself
# ---------------------------------------------------------------------------------------------

def test_image_config_user_healthcheck_and_size(image):
    cfg = image["Config"]
    assert cfg["User"] == f"{UID}:{UID}", "numeric non-root user (runAsNonRoot can verify it)"
    assert cfg["Entrypoint"] == ["/usr/local/bin/kproxy", "--config", "/etc/kproxy/config.yaml"]
    assert image["ManifestType"] == "application/vnd.docker.distribution.manifest.v2+json"
    health = image.get("Healthcheck") or cfg.get("Healthcheck") or {}
    assert health.get("Test") and "/healthz" in " ".join(health["Test"]), \
        "HEALTHCHECK missing: build with --format docker (the OCI format drops it)"
    assert "kproxy-probe" in " ".join(health["Test"])
    assert image["Size"] < SIZE_LIMIT, f"image is {image['Size'] / 1e6:.1f} MB"
    print(f"image {IMAGE}: {image['Size'] / 1e6:.1f} MB")


def test_image_holds_only_the_runtime(image):
    script = (
        "echo uid=$(id -u) gid=$(id -g); echo bin=$(ls /usr/local/bin);"
        " test -s /etc/ssl/certs/ca-certificates.crt && echo ca=ok;"
        " for t in gcc g++ cc c++ cmake ninja make ld as; do command -v $t >/dev/null && echo tool=$t; done;"
        " test -e /usr/include/stdio.h && echo headers=yes; echo version=$(/usr/local/bin/kproxy --version)")
    out = podman("run", "--rm", "--network", "none", "--read-only", "--read-only-tmpfs=false", "--cap-drop", "ALL",
                 "--entrypoint", "/bin/bash", IMAGE, "-c", script, check=True)
    facts = {}
    for line in out.stdout.splitlines():
        k, _, v = line.partition("=")
        facts.setdefault(k, []).append(v)
    assert facts["uid"] == [f"{UID} gid={UID}"], out.stdout
    assert facts["bin"] == ["kproxy kproxy-probe"], out.stdout
    assert facts.get("ca") == ["ok"], "CA certificates missing (upstream TLS verifies against them)"
    assert "tool" not in facts and "headers" not in facts, f"build tools in the runtime image: {out.stdout}"
    assert facts["version"][0].startswith("kproxy "), out.stdout


# ---------------------------------------------------------------------------------------------
# readiness first: nothing listens at the upstream until the broker fixture starts
# ---------------------------------------------------------------------------------------------

def test_readyz_503_until_a_broker_answers_then_200(request, containers, upstream_port):
    kp = containers(upstream_port, "readyz").start()
    kp.wait_status("/healthz", 200, 30)
    for _ in range(3):
        assert kp.http_status("/readyz") == 503
        assert kp.exec_probe("/readyz").returncode == 1, "the readiness probe must fail"
        assert kp.exec_probe("/healthz").returncode == 0, "alive while not ready (no restart)"
        time.sleep(0.5)
    request.getfixturevalue("broker")  # starts the broker on the upstream port
    kp.wait_status("/readyz", 200, 90)
    probe = kp.exec_probe("/readyz")
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert "200" in probe.stdout
    assert kp.running()


def test_healthcheck_passes_when_up_and_fails_with_a_wrong_admin_address(broker, containers):
    good = containers(broker.node(1).ports["PLAINTEXT"], "health").start()
    good.wait_status("/healthz", 200, 30)
    out = good.healthcheck()
    assert out.returncode == 0, f"healthcheck failed: {out.stdout}{out.stderr}\n{good.logs()}"

    nothing = kh.free_ports(1)[0]
    bad = containers(broker.node(1).ports["PLAINTEXT"], "unhealthy",
                     env={"KPROXY_ADMIN_ADDR": f"127.0.0.1:{nothing}"}).start()
    bad.wait_status("/healthz", 200, 30)  # kproxy itself is fine; the probe looks elsewhere
    out = bad.healthcheck()
    assert out.returncode != 0, f"healthcheck passed against 127.0.0.1:{nothing}: {out.stdout}"
    assert "unhealthy" in (out.stdout + out.stderr)


def test_runs_as_kubernetes_runs_it(broker, containers):
    kp = containers(broker.node(1).ports["PLAINTEXT"], "k8s").start()
    pid = kp.state()["Pid"]
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    assert status["Uid"].split()[:2] == [str(UID)] * 2
    assert status["Gid"].split()[:2] == [str(UID)] * 2
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0, status["CapEff"]
    assert status["NoNewPrivs"].strip() == "1"
    mounts = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    root = next(m for m in mounts if m.split()[4] == "/")
    assert "ro" in root.split()[5].split(","), f"root filesystem not read-only: {root}"
    conf = next(m for m in mounts if m.split()[4] == "/etc/kproxy")
    assert "ro" in conf.split()[5].split(",")
    out = podman("exec", kp.name, "/bin/bash", "-c", "touch /etc/kproxy/x /tmp/x /x 2>&1; echo rc=$?")
    assert "Read-only file system" in out.stdout, out.stdout


# ---------------------------------------------------------------------------------------------
# real clients through the container
# ---------------------------------------------------------------------------------------------

def test_java_exactly_once_through_the_container(broker, containers, topic_name):
    broker.create_topic(topic_name, partitions=3)
    kp = containers(broker.node(1).ports["PLAINTEXT"], "eos").start()
    bootstrap = f"{kp.advertise}:{kp.port}"
    prod = clients.txn_produce(bootstrap, topic_name, 1000, 10)
    assert prod["ok"], prod
    assert (prod["records_committed"], prod["transactions_committed"]) == (1000, 10)
    cons = clients.read_committed(bootstrap, topic_name, 1000)
    assert cons["ok"], cons
    assert (cons["count"], cons["unique_keys"], cons["duplicates"], cons["content_mismatches"]) == (1000, 1000, 0, 0)
    assert cons["timed_out"] is False

    # every broker address a client learns is the container's advertised one
    md = kh.metadata("127.0.0.1", kp.port, [topic_name])
    assert md.brokers == {1: (kp.advertise, kp.base + 1)}
    real = set(broker.node(1).ports.values())
    assert not {p for _, p in md.brokers.values()} & real
    assert kp.running(), kp.logs()


# ---------------------------------------------------------------------------------------------
# termination
# ---------------------------------------------------------------------------------------------

def fetch_v4(topic: str, max_wait_ms: int) -> bytes:
    partitions = struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20)
    topics = struct.pack(">i", 1) + kh._str(topic) + partitions
    return struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0) + topics


def test_sigterm_with_a_fetch_in_flight_drains_and_exits_0(broker, containers, topic_name):
    broker.create_topic(topic_name, partitions=1)
    kp = containers(broker.node(1).ports["PLAINTEXT"], "sigterm").start()
    kp.wait_status("/readyz", 200, 60)
    wait_ms = 4000
    with socket.create_connection(("127.0.0.1", kp.port), timeout=30) as s:
        # the broker parks a Fetch on an empty partition for max_wait_ms: a request in flight
        s.sendall(kafka_request(FETCH, 4, 4242, fetch_v4(topic_name, wait_ms)))
        time.sleep(1.0)
        t0 = time.monotonic()
        podman("kill", "--signal", "TERM", kp.name, check=True)
        body = recv_frame(s)
        got = time.monotonic() - t0
        assert struct.unpack(">i", body[:4])[0] == 4242
        assert got >= wait_ms / 1000.0 - 1.5, "the response is the broker's parked Fetch"
    out = podman("wait", kp.name, timeout=kp.drain_timeout + 30)
    elapsed = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0", f"exit code {out.stdout.strip()}\n{kp.logs()}"
    assert elapsed <= kp.drain_timeout + 3, f"drain took {elapsed:.1f}s, drain_timeout {kp.drain_timeout}s"
