"""pytest fixtures for kproxy's integration tests against real Kafka 4.4.0 brokers.

Session-scoped: `kafka` (one combined broker+controller with PLAINTEXT and SASL_PLAINTEXT
listeners) and `kafka_cluster` (3 nodes, each broker+controller) start once per run, only
if a selected test asks for them, and are always stopped at the end. Startup times are
shown in the terminal summary and written to build/test-logs/kafka-startup-times.json.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import kafka_harness as kh  # noqa: E402

STARTUP_SECONDS: dict = {}
# Upper bound for the whole integration session (seconds, 0 = none). When it passes, the
# session is interrupted like a Ctrl-C (fixtures still stop the brokers); if teardown hangs,
# the process exits hard 120 s later. Per-test hangs also get a stack dump after
# faulthandler_timeout (pytest.ini).
SESSION_TIMEOUT_S = float(os.environ.get("KPROXY_INTEGRATION_TIMEOUT", "2700"))
WATCHDOG_MESSAGE = "[conftest] integration session timeout"
_WATCHDOG_FIRED = threading.Event()
SINGLE_NODE_TIMEOUT_S = 90.0

# Sanitizer reports (kproxy built with -DKPROXY_SANITIZE=ON, as scripts/test does): every
# sanitized process started by a test (kproxy, its CLI, the bench tools) writes its AddressSanitizer,
# LeakSanitizer or UndefinedBehaviorSanitizer report to SANITIZER_DIR/report.<pid> instead of
# stderr, stops at the first error, and exits with SANITIZER_EXIT_CODE. The autouse fixture
# `no_sanitizer_reports` fails the test during which a report appeared; reports that appear
# between tests fail the session (pytest_sessionfinish). Harmless for an unsanitized build.
SANITIZER_DIR = kh.REPO_ROOT / "build" / "test-logs" / "sanitizer"
SANITIZER_EXIT_CODE = 23
_SANITIZER_COMMON = f"log_path={SANITIZER_DIR / 'report'}:halt_on_error=1:exitcode={SANITIZER_EXIT_CODE}"
os.environ.setdefault("ASAN_OPTIONS", f"{_SANITIZER_COMMON}:detect_leaks=1:abort_on_error=0:check_initialization_order=1")
os.environ.setdefault("UBSAN_OPTIONS", f"{_SANITIZER_COMMON}:print_stacktrace=1")
os.environ.setdefault("LSAN_OPTIONS", f"{_SANITIZER_COMMON}")
_SEEN_REPORTS: set = set()
_REPORTED_LOGS: set = set()
CLUSTER_TIMEOUT_S = 180.0


def sanitizer_reports() -> set:
    """Names of the sanitizer report files written so far in this session's SANITIZER_DIR."""
    try:
        return {p.name for p in SANITIZER_DIR.iterdir() if p.name.startswith("report")}
    except OSError:
        return set()


def _report_text(names) -> str:
    out = []
    for n in sorted(names):
        try:
            text = (SANITIZER_DIR / n).read_text(errors="replace")
        except OSError as e:
            text = f"(unreadable: {e})"
        out.append(f"--- {SANITIZER_DIR / n}\n{text[-6000:]}")
    return "\n".join(out)


# GCC's UBSan runtime ignores log_path next to ASan and prints to stderr: kproxy's own log.
_STDERR_REPORT = re.compile(r"^.*(?:runtime error: |==\d+==ERROR: \w+Sanitizer).*$", re.M)


def _kproxy_logs_with_reports(since: float) -> list:
    from test_proxy_support import LOG_ROOT  # noqa: E402 (after sys.path is set up)
    found = []
    for log in LOG_ROOT.glob("*/kproxy.log"):
        if log in _REPORTED_LOGS:
            continue
        try:
            if log.stat().st_mtime < since:
                continue
            m = _STDERR_REPORT.search(log.read_text(errors="replace"))
        except OSError:
            continue
        if m:
            _REPORTED_LOGS.add(log)
            found.append(f"--- {log}\n{m.group(0)}")
    return found


@pytest.fixture(autouse=True)
def no_sanitizer_reports():
    """Fails the test if a sanitized process wrote an ASan/LSan/UBSan report while it ran: a
    report file, or a UBSan/ASan line in a kproxy log written during the test."""
    started = time.time() - 1
    yield
    new = sanitizer_reports() - _SEEN_REPORTS
    logged = _kproxy_logs_with_reports(started)
    if new or logged:
        _SEEN_REPORTS.update(new)
        pytest.fail("sanitizer report(s) written during this test:\n" + _report_text(new) + "\n".join(logged),
                    pytrace=False)


def pytest_sessionfinish(session, exitstatus):
    new = sanitizer_reports() - _SEEN_REPORTS
    if new:
        _SEEN_REPORTS.update(new)
        sys.stderr.write(f"\n[conftest] sanitizer report(s) written outside any test:\n{_report_text(new)}\n")
        session.exitstatus = 1


def pytest_sessionstart(session):
    SANITIZER_DIR.mkdir(parents=True, exist_ok=True)
    # Reports of an earlier session are not this session's failures.
    for n in sanitizer_reports():
        (SANITIZER_DIR / n).unlink(missing_ok=True)
    if SESSION_TIMEOUT_S <= 0:
        return

    def fire():
        _WATCHDOG_FIRED.set()
        sys.stderr.write(f"\n{WATCHDOG_MESSAGE}: {SESSION_TIMEOUT_S:.0f}s passed, interrupting\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(120)
        sys.stderr.write(f"{WATCHDOG_MESSAGE}: teardown did not finish, exiting hard\n")
        kh._cleanup_all()
        os._exit(3)

    timer = threading.Timer(SESSION_TIMEOUT_S, fire)
    timer.daemon = True
    timer.start()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


def _started(cluster: kh.KafkaCluster, timeout: float, what: str):
    """Fixture body: starts `cluster` (its startup time goes to the summary as `what`), yields
    it, stops it."""
    try:
        cluster.start(timeout=timeout)
        STARTUP_SECONDS[what] = cluster.startup_seconds
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka():
    """One real Kafka 4.4.0 node (broker+controller), PLAINTEXT + SASL_PLAINTEXT."""
    yield from _started(kh.KafkaCluster(1, sasl=True, name="single"), SINGLE_NODE_TIMEOUT_S, "single node")


@pytest.fixture(scope="session")
def kafka_cluster():
    """A real 3-node Kafka 4.4.0 KRaft cluster, every node broker+controller, PLAINTEXT."""
    yield from _started(kh.KafkaCluster(3, name="cluster3"), CLUSTER_TIMEOUT_S, "3-node cluster")


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique to this test run."""
    base = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:80]
    return f"{base}-{uuid.uuid4().hex[:6]}"


def pytest_terminal_summary(terminalreporter):
    if _WATCHDOG_FIRED.is_set():
        # scripts/test looks for this line (stderr written during a test is captured).
        terminalreporter.write_line(f"{WATCHDOG_MESSAGE}: the session ran longer than {SESSION_TIMEOUT_S:.0f}s "
                                    f"(KPROXY_INTEGRATION_TIMEOUT) and was interrupted")
    if not STARTUP_SECONDS:
        return
    terminalreporter.section("Kafka startup times")
    for what, secs in STARTUP_SECONDS.items():
        terminalreporter.write_line(f"{what}: {secs:.1f} s")
    out = kh.REPO_ROOT / "build" / "test-logs" / "kafka-startup-times.json"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                   "seconds": {k: round(v, 2) for k, v in STARTUP_SECONDS.items()}}) + "\n")
    except OSError:
        pass
