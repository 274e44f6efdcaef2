"""Issue #30 item 5, "Memory that never comes back": after a burst of large requests kproxy gives
the memory back to the system once the connections are gone (docs/architecture.md "Memory").

The burst is issue #30's hostile run: 16 connections each announce a 100 MiB Produce v9 request,
send 16 MiB of zeros and close (half of them after an answered ApiVersions, so they look like real
clients). kproxy gathers those frames in buffers of its own (they are not forwarded: first packets
are never streamed, and 100 MiB does not fit limits.max_streamed_request_bytes), frees them when
the connections close, and must then be back near its RSS at start within 10 s.

RSS is only meaningful for a plain build: the sanitized build in build/ allocates through
AddressSanitizer, which keeps freed memory in its quarantine and its own size-class caches, and
never runs glibc's malloc. The test runs the plain kproxy of build-plain/ (scripts/test builds it
beside build/; $KPROXY_PLAIN_BIN overrides) and skips, saying why, when there is none.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import List, Optional

import pytest

import kafka_harness as kh
import slowness
from test_chaos_support import ChaosKproxy
from test_proxy_support import recv_frame, request

HOSTILE_SIZE = 100 * 1024 * 1024  # announced by each request
# MiB sent before closing, by connection: issue #30's 16 MiB, and less, so that kproxy's frame
# buffers are freed at sizes glibc then serves from its heaps (its mmap threshold rises to the
# size of a freed mapped block, up to 32 MiB).
SENT_MIB = [int(x) for x in os.environ.get("KPROXY_MEMORY_SENT_MIB", "16,12,6,3").split(",")]
WAVES = int(os.environ.get("KPROXY_MEMORY_WAVES", "2"))
CONNECTIONS = 16
# RSS 10 s after the last connection closed may exceed RSS at start by at most this much.
# Measured (plain Release build, 2 workers; figures in docs/architecture.md "Memory"): before the
# fix, this burst left +49 MiB for good, the churn test below +33 MiB; with it, +0.4 and +0.7 MiB.
# 16 MiB is over 20x what the fixed kproxy keeps and a third of the smallest retained figure.
RSS_BOUND_KIB = 16 * 1024
SETTLE_S = 10.0


def plain_kproxy_binary() -> Optional[str]:
    """A kproxy built without sanitizers: $KPROXY_PLAIN_BIN, else build-plain/proxy/kproxy."""
    env = os.environ.get("KPROXY_PLAIN_BIN")
    candidates = [Path(env)] if env else [kh.REPO_ROOT / "build-plain" / "proxy" / "kproxy"]
    for c in candidates:
        if c.exists() and os.access(c, os.X_OK) and b"__asan_init" not in c.read_bytes():
            return str(c)
    return None


def _hostile_client(port: int, answered_first: bool, sent_mib: int, errors: list) -> None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            if answered_first:
                s.sendall(request(18, 0, 7, b""))
                recv_frame(s)
            s.sendall(struct.pack(">ihhi", HOSTILE_SIZE, 0, 9, 1))
            chunk = bytes(1 << 20)
            for _ in range(sent_mib):
                s.sendall(chunk)
    except OSError as e:  # kproxy may close one over limits.max_buffered_frame_bytes
        errors.append(repr(e))


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _plain_binary_or_skip() -> str:
    binary = plain_kproxy_binary()
    if binary is None:
        pytest.skip("no plain (unsanitized) kproxy: build build-plain/ (scripts/test does, or "
                    "KPROXY_SANITIZE=OFF cmake -S . -B build-plain -DCMAKE_BUILD_TYPE=Release && "
                    "cmake --build build-plain --target kproxy) or set KPROXY_PLAIN_BIN; the sanitized "
                    "build's allocator is not glibc's, its RSS says nothing about what kproxy returns")
    return binary


def _settled_rss(kp: ChaosKproxy, start: int) -> tuple:
    """(VmRSS KiB, seconds waited): once every client connection is closed on kproxy's side, RSS
    as soon as it is within a quarter of the bound of `start`, else after SETTLE_S."""
    pid = kp.proc.pid
    deadline = time.monotonic() + slowness.scaled(30)
    while kp.metric("kproxy_connections", side="client") > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kp.metric("kproxy_connections", side="client") == 0, kp.log_text()[-3000:]
    closed_at = time.monotonic()
    after = _rss_kib(pid)
    while time.monotonic() - closed_at < SETTLE_S:
        after = _rss_kib(pid)
        if after - start <= RSS_BOUND_KIB // 4:
            break
        time.sleep(0.25)
    return after, time.monotonic() - closed_at


def _started_and_measured(kp: ChaosKproxy) -> int:
    """VmRSS (KiB) of a kproxy that has answered one request and been scraped once."""
    with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
        s.sendall(request(18, 0, 1, b""))
        recv_frame(s)
    kp.metric("kproxy_connections")  # the admin server's first scrape allocates too
    time.sleep(1.0)
    return _rss_kib(kp.proc.pid)


def test_memory_comes_back_after_a_burst_of_large_requests(kafka):
    """Frames of 3-16 MiB: glibc unmaps them when freed only at a fixed mmap threshold."""
    binary = _plain_binary_or_skip()
    with ChaosKproxy(kafka.bootstrap(), name="memory", workers=2, log_level="info", binary=binary) as kp:
        pid = kp.proc.pid
        start = _started_and_measured(kp)
        peak = [start]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _rss_kib(pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        errors: List[str] = []
        for wave in range(WAVES):
            attackers = [threading.Thread(target=_hostile_client, args=(kp.port, i % 2 == 1, SENT_MIB[(i + wave) % len(SENT_MIB)], errors))
                         for i in range(CONNECTIONS)]
            for t in attackers:
                t.start()
            for t in attackers:
                t.join(timeout=120)
        after, waited = _settled_rss(kp, start)
        done.set()
        sampler.join()
        print(f"[memory] VmRSS start {start} KiB, peak {peak[0]} KiB, {waited:.1f} s after the last "
              f"close {after} KiB ({after - start:+d}); "
              f"trims {kp.metric('kproxy_proxy_memory_trims_total'):.0f}; client errors {len(errors)}")
        assert peak[0] - start > 24 * 1024, f"the burst did not raise RSS (start {start}, peak {peak[0]} KiB): nothing measured"
        assert after - start <= RSS_BOUND_KIB, (
            f"kproxy kept {after - start} KiB above its start ({start} KiB) {SETTLE_S:.0f} s after the last connection closed "
            f"(peak {peak[0]} KiB)")


def test_memory_comes_back_after_many_connections_with_small_frames(kafka):
    """Partial frames of 60-120 KiB, under the mmap threshold, on 3 waves of 400 connections:
    freed into the arenas, where only malloc_trim gives their pages back."""
    binary = _plain_binary_or_skip()
    with ChaosKproxy(kafka.bootstrap(), name="churn", workers=2, log_level="info", binary=binary) as kp:
        pid = kp.proc.pid
        start = peak = _started_and_measured(kp)
        for _ in range(3):
            socks = []
            try:
                for i in range(400):
                    s = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
                    socks.append(s)
                    size = (60 + (i * 7) % 60) << 10
                    s.sendall(struct.pack(">ihhi", size, 0, 9, 1) + bytes(size - 20))
                time.sleep(1.0)  # every partial frame gathered
                peak = max(peak, _rss_kib(pid))
            finally:
                for s in socks[::2] + socks[1::2]:  # interleaved frees: holes, not one free run
                    s.close()
            time.sleep(0.3)
        after, waited = _settled_rss(kp, start)
        print(f"[memory] churn: VmRSS start {start} KiB, peak {peak} KiB, {waited:.1f} s after the last close {after} KiB "
              f"({after - start:+d}); trims {kp.metric('kproxy_proxy_memory_trims_total'):.0f}")
        assert peak - start > 24 * 1024, f"the connections did not raise RSS (start {start}, peak {peak} KiB): nothing measured"
        assert after - start <= RSS_BOUND_KIB, (
            f"kproxy kept {after - start} KiB above its start ({start} KiB) {SETTLE_S:.0f} s after the last connection closed "
            f"(peak {peak} KiB)")
