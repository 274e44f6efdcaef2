"""Smoke test of bench/tls/run: the three setups (plaintext, TLS on one leg, on both legs) carry
load through a chain of three kproxies with no error, and the table has a CPU figure for each;
the same with HAProxy in the middle kproxy's place (issue #20). No real Kafka needed; about 30 s. Uses the binaries of build/ (kproxy, kproxy-load, kproxy-sink-broker)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import kafka_harness as kh

REPO_ROOT = kh.REPO_ROOT
BUILD = REPO_ROOT / "build"


@pytest.mark.skipif(not (BUILD / "bench" / "proxy" / "kproxy-load").exists() or not (BUILD / "proxy" / "kproxy").exists(),
                    reason="build/ has no kproxy-load (configure with benchmarks on)")
def test_bench_tls_quick_run(tmp_path):
    out = tmp_path / "results.json"
    r = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "tls" / "run"), "--quick", "--no-build", "--build-dir", str(BUILD),
                        "--sizes", "16KiB", "--idle", "100", "--json", str(out)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "errors: none" in r.stdout
    results = json.loads(out.read_text())
    row = results["sizes"]["16384"]
    for setup in ("plaintext", "tls-one-leg", "tls-both-legs"):
        assert row[setup]["requests_per_s"] > 0, row
        assert row[setup]["a_cpu_s_per_gb"] > 0, row
    # P2 decrypts only in the TLS setups: its CPU per GB must show it.
    assert row["tls-one-leg"]["p2_cpu_s_per_gb"] > row["plaintext"]["p2_cpu_s_per_gb"], row
    for setup in ("plaintext", "tls-one-leg", "tls-both-legs"):
        assert results["idle"][setup]["ready"] == 100, results["idle"]
    if shutil.which("haproxy"):  # scripts/setup installs it: HAProxy in A's place, same TLS work
        h = results["haproxy"]["sizes"]["16384"]
        for setup in ("plaintext", "tls-one-leg", "tls-both-legs"):
            assert h[setup]["requests_per_s"] > 0 and h[setup]["a_cpu_s_per_gb"] > 0, h
            assert results["haproxy"]["idle"][setup]["ready"] == 100, results["haproxy"]["idle"]
        assert "kproxy / HAProxy" in r.stdout
        # Interleaved rounds: a ratio per round, and their median (issue #35).
        for setup in ("plaintext", "tls-one-leg", "tls-both-legs"):
            assert len(row[setup]["ratio_rounds"]) == 1 and row[setup]["ratio_median"] > 0, row
        # The chain's three proxies together, with kproxy and with HAProxy as A (issue #48).
        chain = next((line for line in r.stdout.splitlines() if line.startswith("16 KiB   kproxy A / HAProxy A")), None)
        assert chain is not None, r.stdout
        assert all(float(v.rstrip("x")) > 0 for v in chain.split()[-3:]), chain
    # The SNI listener as A (issue #33), TLS both legs, beside the port-per-broker listener: P1
    # reached it by name (bootstrap and broker names), so figures mean the SNI route carried load.
    n = results["sni"]["sizes"]["16384"]["tls-both-legs"]
    assert n["requests_per_s"] > 0 and n["a_cpu_s_per_gb"] > 0, n
    assert len(n["sni_ratio_rounds"]) == 1 and n["sni_ratio_median"] > 0, n
    assert results["sni"]["idle"]["tls-both-legs"]["ready"] == 100, results["sni"]["idle"]
    assert results["sni"]["idle"]["tls-both-legs"]["bytes_per_pair"] > 0, results["sni"]["idle"]
    assert "SNI listener A CPU s/GB" in r.stdout and "SNI listener as A" in r.stdout
