"""Issue #34: Testcontainers' ToxiproxyContainer (Java, org.testcontainers:testcontainers-toxiproxy
2.0.5) running kproxy's image in place of Toxiproxy's, through podman's Docker-compatible API
(`podman system service`, started here on a private socket with the stage's podman settings).

What a Testcontainers user changes, and what this machine needs on top (docs/toxiproxy.md,
"Testcontainers"):

- the image: `DockerImageName.parse(kproxy image).asCompatibleSubstituteFor("ghcr.io/shopify/toxiproxy")`;
- a config turning the Toxiproxy API on at 0.0.0.0:8474, copied to /etc/kproxy/config.yaml;
- here only: network mode slirp4netns. podman 4.3's compat API turns the default network mode
  into its CNI bridge whatever containers.conf says, and that bridge would change the machine's
  network setup (a bridge device and iptables rules); with host networking podman discards the
  port mappings and Testcontainers never sees ToxiproxyContainer's ports (the second test).
  slirp4netns keeps the container's network in its own namespace and maps the ports on the host
  with a user-space forwarder (rootlessport);
- here only: TESTCONTAINERS_RYUK_DISABLED (the Ryuk image cannot be pulled) and
  TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 (this machine has /.dockerenv, so Testcontainers would
  take the gateway of podman's unused bridge network, 10.88.0.1, as the containers' host).

The proxy's upstream is kproxy's admin API inside the container (127.0.0.1:9644): a container
in its own network namespace reaches the machine's loopback only through slirp4netns's
10.0.2.2, an address outside the loopback range that tests here do not connect to, so neither a
host-side echo server nor the stage's Kafka broker can be the upstream.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import CONTAINER_PREFIX, HERE, IMAGE, LOGS, PODMAN, ROOT

import kafka_harness as kh  # noqa: E402
import slowness  # noqa: E402

LIBS = ROOT / ".cache" / "testcontainers-java" / "libs"
SRC = HERE / "testcontainers" / "KproxyToxiproxyContainer.java"
LATENCY = 0.300  # the driver's latency toxic, seconds
CONFIG = """\
# kproxy as Testcontainers' ToxiproxyContainer runs it: the Toxiproxy API on the module's control
# port (8474) on every address of the container; a config needs one listener, unused here.
listeners:
  - name: kafka
    listen: 127.0.0.1:{kafka}
    upstream: 127.0.0.1:9093
    broker_ports: listen
admin:
  listen: 127.0.0.1:{admin}
toxiproxy:
  listen: {toxiproxy}
log:
  format: json
  level: info
"""
# In the container's own network namespace the fixed ports are the container's; on the host's
# network (the second test) they would be the machine's, so there the kernel picks them.
PORTS = {"slirp4netns": {"kafka": 9092, "admin": 9644, "toxiproxy": "0.0.0.0:8474"},
         "host": {"kafka": 0, "admin": 0, "toxiproxy": "127.0.0.1:0"}}


def podman(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(PODMAN), *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def image():
    out = podman("image", "inspect", IMAGE)
    assert out.returncode == 0, f"no image {IMAGE}: run tests/container/build-image\n{out.stderr}"


@pytest.fixture(scope="module")
def classes(tmp_path_factory) -> Path:
    if not list(LIBS.glob("testcontainers-toxiproxy-*.jar")):
        pytest.fail(f"Testcontainers is not installed in {LIBS}: run scripts/setup")
    out = tmp_path_factory.mktemp("testcontainers-classes")
    javac = Path(kh.java_binary()).resolve().parent / "javac"
    p = subprocess.run([str(javac if javac.exists() else shutil.which("javac")), "-encoding", "UTF-8", "-Xlint:all",
                        "-d", str(out), "-cp", f"{LIBS}/*", str(SRC)],
                       capture_output=True, text=True, timeout=slowness.scaled(120))
    assert p.returncode == 0, f"javac failed:\n{p.stdout}{p.stderr}"
    return out


@pytest.fixture(scope="module")
def docker_api(tmp_path_factory):
    """`podman system service` on a socket of its own (the stage's storage, runtime and
    containers.conf, through tests/container/podman); stopped when the module ends."""
    if not shutil.which("slirp4netns"):
        pytest.fail("slirp4netns not found (scripts/setup installs it)")
    sock = tmp_path_factory.mktemp("podman-api") / "podman.sock"
    log = open(LOGS / f"podman-api-{uuid.uuid4().hex[:6]}.log", "w")
    proc = subprocess.Popen([str(PODMAN), "system", "service", "--time=0", f"unix://{sock}"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + slowness.scaled(30)
        while True:
            assert proc.poll() is None, f"podman system service exited with {proc.returncode} (log {log.name})"
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(2)
                    s.connect(str(sock))
                    s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
                    if s.recv(4096).split(b"\r\n", 1)[0].endswith(b"200 OK"):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"podman API on {sock} did not answer /_ping (log {log.name})"
            time.sleep(0.2)
        yield f"unix://{sock}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
        log.close()


def run_driver(classes: Path, docker_api: str, network_mode: str, tmp_path: Path) -> dict:
    name = f"{CONTAINER_PREFIX}-tc-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(**PORTS[network_mode]))
    env = {**os.environ, "DOCKER_HOST": docker_api, "TESTCONTAINERS_RYUK_DISABLED": "true",
           "TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1"}
    env.pop("TESTCONTAINERS_DOCKER_SOCKET_OVERRIDE", None)
    try:
        p = subprocess.run([kh.java_binary(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                            "-cp", f"{classes}:{LIBS}/*", "KproxyToxiproxyContainer", IMAGE, network_mode, name, config],
                           capture_output=True, text=True, env=env, timeout=slowness.scaled(240))
    finally:
        left = podman("ps", "-a", "--filter", f"name=^{name}$", "--format", "{{.Names}}").stdout.split()
        if left:
            podman("rm", "--force", "--time", "0", name)
    (LOGS / f"{name}.log").write_text(p.stdout + p.stderr)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    assert p.returncode == 0 and lines, f"driver exit {p.returncode}:\n{p.stdout[-4000:]}{p.stderr[-6000:]}"
    seen = json.loads(lines[-1])
    seen["left_behind"] = left
    print(json.dumps({k: (v[:300] + "...") if isinstance(v, str) and len(v) > 300 else v for k, v in seen.items()}))
    return seen


def ok(samples) -> list:
    assert all(s.get("status_line", "").startswith("HTTP/1.1 200") for s in samples), samples
    return [s["seconds"] for s in samples]


def test_toxiproxy_container_runs_kproxys_image_and_a_latency_toxic_slows_a_tcp_proxy(image, classes, docker_api, tmp_path):
    seen = run_driver(classes, docker_api, "slirp4netns", tmp_path)
    assert "error" not in seen, seen
    assert seen["left_behind"] == [], "ToxiproxyContainer.stop() left the container behind"
    assert seen["network_mode"] == "slirp4netns"
    # Testcontainers' wait strategy (GET /version on 8474) passed against kproxy, not Toxiproxy
    # (toxiproxy-java's version() hands back the body of GET /version as it came)
    version = json.loads(seen["version"])["version"]
    assert version.startswith("kproxy ") and version.endswith("(Toxiproxy API v2)"), seen["version"]
    assert seen["host"] == "127.0.0.1" and seen["control_port"] > 0 and seen["mapped_port"] > 0
    assert seen["created"] == {"name": "admin", "listen": "0.0.0.0:8666", "upstream": "127.0.0.1:9644"}
    proxy = json.loads(seen["proxy_json"])
    assert proxy["relay"] == "tcp" and proxy["kafka"] is False, proxy  # the admin API is no Kafka broker
    assert proxy["enabled"] is True

    plain, slow, after = ok(seen["plain"]), ok(seen["with_latency"]), ok(seen["after_remove"])
    assert seen["toxics_listed"] == 1 and seen["latency_ms"] == int(LATENCY * 1000)
    assert seen["toxics_after_remove"] == 0 and seen["proxies_after_delete"] == 0
    # Each response through the toxic waits at least its latency; without it, far less.
    assert min(slow) >= LATENCY * 0.95, slow
    assert max(slow) < LATENCY + slowness.scaled(3), slow
    assert statistics.median(plain) < LATENCY / 2, plain
    assert statistics.median(after) < LATENCY / 2, after
    print(f"latency toxic {LATENCY * 1000:.0f} ms: median round trip plain {statistics.median(plain) * 1000:.1f} ms, "
          f"with toxic {statistics.median(slow) * 1000:.1f} ms, after removal {statistics.median(after) * 1000:.1f} ms; "
          f"container started in {seen['start_seconds']:.1f} s")


def test_toxiproxy_container_with_host_networking_never_sees_its_ports(image, classes, docker_api, tmp_path):
    """Why the first test uses slirp4netns: with --network host podman discards the port
    mappings, and Testcontainers waits for ToxiproxyContainer's exposed ports to be mapped."""
    seen = run_driver(classes, docker_api, "host", tmp_path)
    assert seen["left_behind"] == []
    assert "error" in seen and "version" not in seen, seen
    assert "ContainerLaunchException" in seen["error"], seen
    assert "ports={}" in seen.get("cause", ""), seen.get("cause")
