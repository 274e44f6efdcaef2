"""Soak (issue #8): 1,000 client connections pipeline a seeded mix of APIs (Produce, Metadata,
FindCoordinator, InitProducerId, ApiVersions) through kproxy to the bench sink broker
(bench/proxy/) while seeded fault rules inject errors, delays and connection closes, for
KPROXY_SOAK_SECONDS (default 60; 600 for the long run). Then:

  - the clients saw zero correlation-id mismatches and no answer that does not decode;
  - every fault rule fired (kproxy_faults_injected_total), so the faults really were in the mix;
  - kproxy never crashed, and exits 0 on SIGTERM (under the sanitized build of scripts/test, with
    ASan, UBSan and LeakSanitizer watching the whole run);
  - kproxy's RSS grew less than 5% between the end of the warm-up and the end of the run
    (VmRSS sampled every second; medians of 5 s at each end);
  - kproxy's open descriptors (/proc/PID/fd) are back to their count before the load once the
    clients have left.

Prints one summary line with the figures. No real Kafka needed (the sink answers everything).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import threading
import time
import urllib.request

import pytest

import kafka_harness as kh
from test_bench_smoke import bench_dir
from test_proxy_support import Kproxy, fault_rule, stop_process

SOAK_SECONDS = float(os.environ.get("KPROXY_SOAK_SECONDS", "60"))
CONNECTIONS = 1000
DEPTH = 4
RSS_GROWTH_MAX = 0.05
FDS_NEEDED = 2 * CONNECTIONS + 512  # kproxy: a client and an upstream socket per connection

# Seeded (reproducible) faults of every kind the soak covers: error codes set in forwarded
# answers, delays of requests and responses, and connections closed before and after forwarding.
SOAK_FAULTS = [  # (name, match, action, trigger) as fault_rule() takes them
    ("soak-produce-error", "api: Produce", "error: NOT_ENOUGH_REPLICAS", "{ probability: 0.02, seed: 11 }"),
    ("soak-produce-delay", "api: Produce", "delay: 5ms, jitter: 5ms, side: request", "{ probability: 0.01, seed: 12 }"),
    ("soak-produce-close", "api: Produce", "close: after", "{ probability: 0.0005, seed: 13 }"),
    ("soak-metadata-delay", "api: Metadata", "delay: 20ms, jitter: 10ms, side: response", "{ probability: 0.05, seed: 14 }"),
    ("soak-metadata-close", "api: Metadata", "close: before", "{ probability: 0.001, seed: 15 }"),
    ("soak-coordinator-error", "api: FindCoordinator", "error: COORDINATOR_NOT_AVAILABLE", "{ probability: 0.05, seed: 16 }"),
    ("soak-init-producer-id-error", "api: InitProducerId", "error: CONCURRENT_TRANSACTIONS", "{ probability: 0.05, seed: 17 }"),
]
FAULTS_YAML = "faults:\n" + "".join(fault_rule(*rule) for rule in SOAK_FAULTS)
RULES = [rule[0] for rule in SOAK_FAULTS]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def injected_by_rule(admin_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("kproxy_faults_injected_total{"):
            labels, value = line.rsplit(" ", 1)
            rule = labels.split('rule="', 1)[1].split('"', 1)[0]
            out[rule] = out.get(rule, 0) + float(value)
    return out


@pytest.fixture
def nofile_limit():
    """Raises this process's descriptor limit (inherited by kproxy, the sink and the load) to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < FDS_NEEDED:
        pytest.skip(f"the soak needs {FDS_NEEDED} descriptors per process; the hard limit is {hard} (ulimit -Hn)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_soak_1000_connections_api_mix_with_random_faults(nofile_limit, tmp_path):
    tools = bench_dir()
    warmup = min(60.0, max(10.0, SOAK_SECONDS * 0.2))
    window = max(5.0, SOAK_SECONDS - warmup)
    sink_log = open(tmp_path / "sink.log", "wb")
    sink = subprocess.Popen([str(tools / "kproxy-sink-broker"), "--listen", "127.0.0.1:0", "--max-seconds",
                             str(int(SOAK_SECONDS + 180))], stdout=subprocess.PIPE, stderr=sink_log,
                            preexec_fn=kh._child_setup)
    try:
        line = sink.stdout.readline().decode().strip()
        assert line.startswith("listening on 127.0.0.1:"), line
        sink_port = int(line.rsplit(":", 1)[1])
        admin_port = kh.free_ports(1)[0]
        # A small ASan quarantine (sanitized build): freed memory is held back only briefly, so the
        # RSS plateau is reached within the warm-up. Ignored by a plain build.
        asan = os.environ.get("ASAN_OPTIONS", "")
        with Kproxy(f"127.0.0.1:{sink_port}", name="soak", workers=2, log_level="warn",
                    extra_yaml=f"admin: {{ listen: 127.0.0.1:{admin_port} }}\n" + FAULTS_YAML,
                    env={"ASAN_OPTIONS": (asan + ":" if asan else "") + "quarantine_size_mb=16"}) as kp:
            pid = kp.proc.pid
            # One Metadata round trip first: kproxy opens its broker-port listeners for the sink's
            # node when it first rewrites an address, and those belong to the baseline.
            kh.metadata("127.0.0.1", kp.port, ["bench"])
            time.sleep(1.0)
            fds_before = open_fds(pid)
            samples = []  # (seconds since the load started, VmRSS KiB)
            stop = threading.Event()

            def sample():
                t0 = time.monotonic()
                while not stop.is_set():
                    try:
                        samples.append((time.monotonic() - t0, rss_kib(pid)))
                    except (OSError, RuntimeError):
                        return
                    stop.wait(1.0)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            load = subprocess.run(
                [str(tools / "kproxy-load"), "--target", f"127.0.0.1:{kp.port}", "--mode", "soak", "--connections",
                 str(CONNECTIONS), "--depth", str(DEPTH), "--warmup", str(warmup), "--duration", str(window),
                 "--seed", "8", "--max-seconds", str(SOAK_SECONDS + 120)],
                capture_output=True, text=True, timeout=SOAK_SECONDS + 150)
            stop.set()
            sampler.join()
            lines = [l for l in load.stdout.splitlines() if l.startswith("{")]
            assert lines, f"kproxy-load printed no result (exit {load.returncode}): {load.stderr[-3000:]}"
            r = json.loads(lines[-1])

            assert kp.alive(), f"kproxy died during the soak:\n{kp.log_text()[-3000:]}"
            injected = injected_by_rule(admin_port)
            # The clients have gone (the load generator resets its sockets): descriptors back to baseline.
            deadline = time.monotonic() + 20
            fds_after = open_fds(pid)
            while fds_after != fds_before and time.monotonic() < deadline:
                time.sleep(0.25)
                fds_after = open_fds(pid)

            in_window = [kib for t, kib in samples if t >= warmup]
            head = [kib for t, kib in samples if warmup <= t < warmup + 5]
            tail = [kib for t, kib in samples if warmup + window - 5 <= t < warmup + window]
            rss_start = statistics.median(head) if head else 0
            rss_end = statistics.median(tail) if tail else 0
            growth = (rss_end - rss_start) / rss_start if rss_start else float("inf")
            apis = r.get("apis", {})
            print(f"\nsoak {SOAK_SECONDS:.0f}s: {r['ready']}/{CONNECTIONS} connections, {r['answered']} answers "
                  f"({r.get('requests_per_s', 0):.0f}/s in the window), mismatches {r['mismatches']}, decode errors "
                  f"{r['decode_errors']}, closed by faults and reopened {r['peer_closes']}, error answers "
                  f"{ {k: v['error_responses'] for k, v in apis.items()} }, injected {injected}; kproxy RSS "
                  f"{rss_start / 1024:.1f} -> {rss_end / 1024:.1f} MiB ({growth * 100:+.2f}%, max "
                  f"{max(in_window, default=0) / 1024:.1f} MiB), fds {fds_before} before, {fds_after} after")

            assert load.returncode == 0, f"kproxy-load failed: {r.get('first_error')}\n{load.stderr[-3000:]}"
            assert r["ready"] == CONNECTIONS and r["failed_connections"] == 0
            assert r["mismatches"] == 0 and r["unexpected_responses"] == 0 and r["decode_errors"] == 0
            assert set(apis) == {"produce", "metadata", "find_coordinator", "init_producer_id", "api_versions"}, apis
            assert all(v["answered"] > 0 for v in apis.values()), apis
            for rule in RULES:
                assert injected.get(rule, 0) > 0, f"fault rule {rule} never fired: {injected}"
            assert r["peer_closes"] > 0 and apis["produce"]["error_responses"] > 0
            assert len(head) >= 3 and len(tail) >= 3, samples
            assert growth < RSS_GROWTH_MAX, f"kproxy RSS grew {growth * 100:.1f}% after the warm-up: {samples}"
            assert fds_after == fds_before, f"kproxy holds {fds_after} descriptors, {fds_before} before the load"
            assert kp.stop() == 0
    finally:
        stop_process(sink)
        sink_log.close()
