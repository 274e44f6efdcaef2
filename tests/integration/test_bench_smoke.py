"""Smoke test of the proxy benchmark's tools (bench/proxy/): the sink broker answers ApiVersions,
Metadata and Produce, and the load generator sees zero correlation-id mismatches, straight to the
sink and through kproxy (saturate, fixed rate, idle). No real Kafka needed; a few seconds.

The binaries come from the same build as kproxy: build/bench/proxy/, else the newest
build-*/bench/proxy/ (KPROXY_BENCH_DIR overrides).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

import kafka_harness as kh
from test_proxy_support import Kproxy

REPO_ROOT = kh.REPO_ROOT


def bench_dir() -> Path:
    env = os.environ.get("KPROXY_BENCH_DIR")
    candidates = ([Path(env)] if env else []) + [REPO_ROOT / "build" / "bench" / "proxy"] + sorted(
        REPO_ROOT.glob("build-*/bench/proxy"), key=lambda p: p.stat().st_mtime, reverse=True)
    for c in candidates:
        if (c / "kproxy-sink-broker").exists() and (c / "kproxy-load").exists():
            return c
    pytest.skip("kproxy-sink-broker / kproxy-load not built (cmake with KPROXY_BENCH=ON)")


@pytest.fixture
def sink():
    d = bench_dir()
    p = subprocess.Popen([str(d / "kproxy-sink-broker"), "--listen", "127.0.0.1:0", "--max-seconds", "120"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=kh._child_setup)
    try:
        line = p.stdout.readline().decode().strip()
        assert line.startswith("listening on 127.0.0.1:"), line
        yield p, int(line.rsplit(":", 1)[1])
    finally:
        p.terminate()
        try:
            _, err = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
        else:
            assert p.returncode == 0, f"sink exited with {p.returncode}: {err.decode()}"


def load(port: int, *args: str, timeout: float = 30.0) -> dict:
    d = bench_dir()
    r = subprocess.run([str(d / "kproxy-load"), "--target", f"127.0.0.1:{port}", *args], capture_output=True, text=True,
                       timeout=timeout)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    assert lines, f"kproxy-load printed no result (exit {r.returncode}): {r.stderr}"
    result = json.loads(lines[-1])
    result["exit_code"] = r.returncode
    result["stderr"] = r.stderr
    return result


def assert_clean(r: dict) -> None:
    assert r["exit_code"] == 0, r["stderr"]
    assert r["mismatches"] == 0 and r["unexpected_responses"] == 0
    assert r["produce_errors"] == 0 and r["decode_errors"] == 0 and r["failed_connections"] == 0


def test_sink_answers_api_versions_metadata(sink):
    _, port = sink
    versions = kh.api_versions("127.0.0.1", port)
    assert versions[0][1] >= 9 and versions[3][1] >= 4 and 18 in versions  # Produce, Metadata, ApiVersions
    md = kh.metadata("127.0.0.1", port, ["orders"])
    assert list(md.brokers.values()) == [("127.0.0.1", port)]
    assert len(md.topics["orders"].partitions) == 8
    assert all(p.leader == 0 for p in md.topics["orders"].partitions.values())


def test_load_direct_to_sink(sink):
    _, port = sink
    r = load(port, "--mode", "saturate", "--connections", "2", "--depth", "4", "--size", "1KiB", "--warmup", "0.1",
             "--duration", "0.5", "--expect-broker", f"127.0.0.1:{port}")
    assert_clean(r)
    assert r["answered"] > 100 and r["requests_per_s"] > 0
    assert r["brokers_seen"] == [f"127.0.0.1:{port}"]


def test_load_through_kproxy_sees_no_mismatch(sink):
    _, port = sink
    with Kproxy(f"127.0.0.1:{port}", name="bench-smoke", workers=1, log_level="warn", broker_ports="block") as kp:
        # Metadata through kproxy names kproxy's own port for node 0: the rewrite works on the sink.
        for size in ("1KiB", "200KiB"):
            r = load(kp.port, "--mode", "saturate", "--connections", "3", "--depth", "4", "--size", size, "--warmup", "0.1",
                     "--duration", "0.5", "--expect-broker", f"127.0.0.1:{kp.broker_port(0)}")
            assert_clean(r)
            assert r["answered"] > 10 and r["lost"] == 0
        r = load(kp.port, "--mode", "rate", "--rate", "2000", "--connections", "4", "--warmup", "0.1", "--duration", "0.5")
        assert_clean(r)
        assert r["samples"] > 500 and 0 < r["p50_us"] <= r["p99_us"] <= r["p999_us"]
        r = load(kp.port, "--mode", "idle", "--connections", "50", "--hold", "0.3")
        assert_clean(r)
        assert r["ready"] == 50


def test_transactional_load_through_kproxy_is_tracked(sink):
    """kproxy-load --transactional (bench/proxy/run's part "txn"): InitProducerId, AddPartitionsToTxn,
    transactional Produce and EndTxn answered by the sink, no mismatch; kproxy's transaction tracker
    counts exactly the transactions the load generator committed (issue #32)."""
    from test_chaos_support import ChaosKproxy
    _, port = sink
    with ChaosKproxy(f"127.0.0.1:{port}", name="bench-smoke-txn", workers=1, log_level="warn") as kp:
        r = load(kp.port, "--mode", "saturate", "--transactional", "--txn-produces", "5", "--connections", "3", "--depth", "4",
                 "--size", "1KiB", "--warmup", "0.1", "--duration", "0.5")
        assert_clean(r)
        assert r["transactional"] and r["transactions_committed"] >= 10, r
        assert kp.metric("kproxy_transactions_total", outcome="committed") == r["transactions_committed"]
        assert kp.metric("kproxy_transactions_total", outcome="aborted") == 0
        status, history = kp.admin("GET", "/transactions/kproxy-load-txn-0")
        assert status == 200, history
        ended = [t for t in history["transactions"] if t["outcome"] == "committed"]
        assert ended and all(t["records"] == 5 and t["partitions"] == [{"topic": "bench", "partition": 0}] for t in ended), ended


PROXY_BENCH_BINARIES = ("proxy/kproxy", "bench/proxy/kproxy-sink-broker", "bench/proxy/kproxy-load")


def build_with(binaries, missing: str) -> Path:
    """build/, else the newest build-*/, that has every one of `binaries`; skips with `missing`."""
    for d in [REPO_ROOT / "build"] + sorted(REPO_ROOT.glob("build-*"), key=lambda p: p.stat().st_mtime, reverse=True):
        if all((d / rel).exists() for rel in binaries):
            return d
    pytest.skip(missing)


def admin_bench_build() -> Path:
    """A build with kproxy, the bench/proxy tools and kproxy-admin-mhd."""
    return build_with(PROXY_BENCH_BINARIES + ("bench/admin/kproxy-admin-mhd",),
                      "no build with kproxy-admin-mhd (libmicrohttpd-dev missing, or benchmarks off)")


def test_bench_admin_quick_run(tmp_path):
    """bench/admin/run in a shorter --quick: both servers measured, every row has a figure in both
    columns, and it exits cleanly (issue #29)."""
    build = admin_bench_build()
    out = tmp_path / "results.json"
    r = subprocess.run([str(REPO_ROOT / "bench" / "admin" / "run"), "--quick", "--no-build", "--build-dir", str(build), "--window", "3",
                        "--gets", "20", "--idle", "100", "--slow", "50", "--spread-slow", "280", "--json", str(out)],
                       capture_output=True, text=True, timeout=150)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    header = next(l for l in lines if "libmicrohttpd" in l)
    assert header.split() == ["kproxy", "libmicrohttpd"], header

    def cells(prefix):
        line = next(l for l in lines if l.startswith(prefix))
        return line[len(prefix):].split()

    # "p50 / p99 / max" for each server: six numbers.
    for prefix in ("/metrics p50/p99/max ms, no idle conn", "/metrics p50/p99/max ms, 100 idle"):
        numbers = [c for c in cells(prefix) if c != "/"]
        assert len(numbers) == 6 and all(float(x) >= 0 for x in numbers), (prefix, numbers)
    for prefix in ("slowloris 50 from 1 addr: /healthz answered", "slowloris 280 from 300 addrs: /healthz answered"):
        answered = [c.split("/") for c in cells(prefix)]
        assert len(answered) == 2 and all(int(n) <= int(m) and int(m) >= 5 for n, m in answered), (prefix, answered)
    results = json.loads(out.read_text())
    assert results["metrics_body_bytes"] > 1000
    for server in ("kproxy", "libmicrohttpd"):
        got = results["servers"][server]
        assert "exited" not in got, got  # both servers lived through the run
        assert got["metrics_no_idle"]["failed"] == 0 and got["metrics_no_idle"]["body_bytes"] == results["metrics_body_bytes"], got


def test_latency_tail_quick_run():
    """bench/proxy/latency_tail for one short round: every path measured (direct, HAProxy, kproxy,
    kproxy without the observatory), each with a p99, and kproxy's p99 minus HAProxy's printed
    (issue #48)."""
    if subprocess.run(["which", "haproxy"], capture_output=True).returncode != 0:
        pytest.skip("haproxy is not installed (scripts/setup installs it)")
    build = build_with(PROXY_BENCH_BINARIES, "no build with kproxy, kproxy-sink-broker and kproxy-load (benchmarks off)")
    r = subprocess.run([str(REPO_ROOT / "bench" / "proxy" / "latency_tail"), "--rounds", "1", "--duration", "1", "--rate", "2000",
                        "--build-dir", str(build)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for path in ("direct", "haproxy", "kproxy ", "kproxy, metrics.frames off"):
        line = next((l for l in lines if l.startswith(path) and " p50 " in l), None)
        assert line is not None, (path, r.stdout)
        p99 = float(line.split("p99 ")[1].split()[0])
        assert 0 < p99 < 1_000_000, line
    assert any(l.startswith("kproxy p99 - haproxy p99, median of rounds: ") for l in lines), r.stdout
