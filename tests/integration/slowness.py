"""One measured machine-slowness factor for the integration tests' waits. Stdlib only.

    import slowness
    deadline = time.monotonic() + slowness.scaled(60)   # 60 s on an idle 2-core machine

A wait in the tests ("until the broker serves", "until the client printed its summary") has a
deadline written for an idle machine of the project's kind (2 cores). On a slower or busier
machine the same work takes longer, so every such deadline is multiplied by `factor()`, measured
here instead of raised by hand:

    factor = wall-clock time of a fixed piece of single-threaded CPU work
             / the time it takes on an idle reference machine (REFERENCE_S)

clamped to [1, MAX_FACTOR]. The wall clock counts both a slower CPU and the time the thread waits
for a core while other processes (compilers, stress-ng, other test runs) hold them. It is the
median of SAMPLES runs, measured when first needed and again when the last measurement is older
than MAX_AGE_S (load changes during a run). $KPROXY_TIME_FACTOR fixes it instead.

Only waits that end as soon as their condition holds are scaled: a slow machine makes them
longer, never a fast one shorter; durations that are part of what a test checks (a fault held
for 4 s, a drain deadline) are not.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import List, Optional, Tuple

REFERENCE_S = 0.025      # _work() on the reference machine (2-core Debian 12 VM), idle
SAMPLES = 3
MAX_FACTOR = 5.0
MAX_AGE_S = 60.0

_lock = threading.Lock()
_cached: Optional[Tuple[float, float]] = None  # (factor, when measured, monotonic)
history: List[Tuple[float, float]] = []         # (wall clock time.time(), factor) of every measurement


def _work() -> int:
    x = 0
    for i in range(200_000):
        x = (x * 31 + i) & 0xFFFFFFFF
    return x


def measure() -> float:
    """Measures the factor now (about SAMPLES x REFERENCE_S x factor seconds)."""
    walls = []
    for _ in range(SAMPLES):
        t0 = time.perf_counter()
        _work()
        walls.append(time.perf_counter() - t0)
    return min(MAX_FACTOR, max(1.0, statistics.median(walls) / REFERENCE_S))


def factor() -> float:
    """The current factor (>= 1)."""
    global _cached
    env = os.environ.get("KPROXY_TIME_FACTOR")
    if env:
        return max(1.0, float(env))
    with _lock:
        now = time.monotonic()
        if _cached is None or now - _cached[1] > MAX_AGE_S:
            f = measure()
            _cached = (f, now)
            history.append((time.time(), f))
        return _cached[0]


def scaled(seconds: float) -> float:
    """`seconds` (a deadline for an idle reference machine) for this machine as it is now."""
    return seconds * factor()


def summary() -> str:
    """One line on the factors measured in this process."""
    if not history:
        return "not measured"
    fs = [f for _t, f in history]
    return (f"{len(fs)} measurement(s): first {fs[0]:.2f}, min {min(fs):.2f}, median {statistics.median(fs):.2f}, "
            f"max {max(fs):.2f}")
