"""Issue #30 item 5, "Memory that never comes back": after a burst of large requests kproxy gives
the memory back to the system once the connections are gone (docs/operations.md "Memory").

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
# Measured (plain Release build, 2 workers, this burst; figures in docs/operations.md "Memory"):
# before the fix RSS stayed 100-250 MiB above start for good; with it, 1-3 MiB above start.
# 32 MiB is 10x the largest measured remainder and far below the smallest retained figure.
RSS_BOUND_KIB = 32 * 1024
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


def test_memory_comes_back_after_a_burst_of_large_requests(kafka):
    binary = plain_kproxy_binary()
    if binary is None:
        pytest.skip("no plain (unsanitized) kproxy: build build-plain/ (scripts/test does, or "
                    "KPROXY_SANITIZE=OFF cmake -S . -B build-plain -DCMAKE_BUILD_TYPE=Release && "
                    "cmake --build build-plain --target kproxy) or set KPROXY_PLAIN_BIN; the sanitized "
                    "build's allocator is not glibc's, its RSS says nothing about what kproxy returns")
    with ChaosKproxy(kafka.bootstrap(), name="memory", workers=2, log_level="info", binary=binary) as kp:
        pid = kp.proc.pid
        # Start: after one answered request, so what any first connection sets up is counted.
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            s.sendall(request(18, 0, 1, b""))
            recv_frame(s)
        time.sleep(1.0)
        start = _rss_kib(pid)
        kp.metric("kproxy_connections")  # the admin server's first scrape allocates too
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
        # Every connection closed on kproxy's side too (the gauge counts open client sockets).
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
        done.set()
        sampler.join()
        print(f"[memory] VmRSS start {start} KiB, peak {peak[0]} KiB, {time.monotonic() - closed_at:.1f} s after the last "
              f"close {after} KiB ({after - start:+d}); buffered now {kp.metric('kproxy_proxy_buffered_bytes'):.0f} bytes; "
              f"client errors {len(errors)}")
        assert peak[0] - start > 64 * 1024, f"the burst did not raise RSS (start {start}, peak {peak[0]} KiB): nothing measured"
        assert after - start <= RSS_BOUND_KIB, (
            f"kproxy kept {after - start} KiB above its start ({start} KiB) {SETTLE_S:.0f} s after the last connection closed "
            f"(peak {peak[0]} KiB)")
