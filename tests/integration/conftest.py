"""pytest fixtures for kproxy's integration tests against real Kafka 4.4.0 brokers.

Session-scoped: `kafka` (one combined broker+controller with PLAINTEXT, SASL_PLAINTEXT and the
TLS listeners test_proxy_tls.py needs, certificates from `tls_pki`) and `kafka_cluster` (3 nodes,
each broker+controller) start once per run, only if a selected test asks for them, and are always
stopped at the end. Startup times are
shown in the terminal summary and written to build/test-logs/kafka-startup-times.json.

A test that uses one of them gets it healthy: before each such test the autouse fixture
`shared_clusters_healthy` checks every node is up, sees every broker, and every partition has a
leader and a full ISR; if not (a test before it failed half-way through killing a node, say),
the cluster is repaired (dead nodes restarted, ISRs waited for) or, failing that, started anew,
and the log says so. One failing test does not fail the tests after it.

Waits are scaled by the measured machine slowness (slowness.py); ports come from ports.py.
"""

from __future__ import annotations

import contextlib
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

# librdkafka for the tests: the confluent-kafka wheel from PyPI (it bundles a current librdkafka),
# which scripts/setup installs for the conformance drivers (conformance/drivers/
# confluent-kafka-python). Debian's python3-confluent-kafka has librdkafka 2.0.2, which cannot do
# SCRAM against Kafka 4.x (a doubled nonce, fixed in librdkafka 2.6.1).
RDKAFKA_SITE = (HERE.parent.parent / ".cache" / "conformance" / "confluent-kafka-python" / "venv" / "lib"
                / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages")
if RDKAFKA_SITE.is_dir() and str(RDKAFKA_SITE) not in sys.path:
    sys.path.insert(0, str(RDKAFKA_SITE))

import jvm_cds  # noqa: E402
import kafka_harness as kh  # noqa: E402
import ports  # noqa: E402
import slowness  # noqa: E402

STARTUP_SECONDS: dict = {}
# Upper bound for the whole integration session (seconds, 0 = none). When it passes, the
# session is interrupted like a Ctrl-C (fixtures still stop the brokers); if teardown hangs,
# the process exits hard 120 s later. Per-test hangs also get a stack dump after
# faulthandler_timeout (pytest.ini).
SESSION_TIMEOUT_S = float(os.environ.get("KPROXY_INTEGRATION_TIMEOUT", "2700"))
SESSION_LIMIT_S = SESSION_TIMEOUT_S  # x the machine slowness measured at session start
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
    lo, hi = ports.pool()
    eph = ports.ephemeral_range()
    sys.stderr.write(f"[conftest] listener ports from {lo}-{hi} (ephemeral range {eph[0]}-{eph[1]}); "
                     f"machine slowness factor {slowness.factor():.2f} (waits are scaled by it)\n")
    if SESSION_TIMEOUT_S <= 0:
        return
    # A limit for an idle machine, like every other wait: scaled by the slowness measured now.
    global SESSION_LIMIT_S
    SESSION_LIMIT_S = SESSION_TIMEOUT_S * slowness.factor()

    def fire():
        _WATCHDOG_FIRED.set()
        sys.stderr.write(f"\n{WATCHDOG_MESSAGE}: {SESSION_LIMIT_S:.0f}s passed, interrupting\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(120)
        sys.stderr.write(f"{WATCHDOG_MESSAGE}: teardown did not finish, exiting hard\n")
        kh._cleanup_all()
        os._exit(3)

    timer = threading.Timer(SESSION_LIMIT_S, fire)
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


# Shared (session) clusters: fixture name -> (what, startup timeout on an idle machine).
SHARED_CLUSTERS = {"kafka": ("single node", SINGLE_NODE_TIMEOUT_S), "kafka_cluster": ("3-node cluster", CLUSTER_TIMEOUT_S)}
# Repairs of a shared cluster found unhealthy before a test: (test, what, reason, action).
CLUSTER_REPAIRS: list = []


@pytest.fixture(scope="session")
def tls_pki(tmp_path_factory):
    """A throw-away PKI (tls_pki.py): the CA, and certificates for the broker's TLS listeners
    (broker, expired, wronghost), kproxy's client leg and upstream client certificate, an app."""
    from tls_pki import TestPki
    p = TestPki(tmp_path_factory.mktemp("tls-pki"))
    p.broker = p.issue("broker", "IP:127.0.0.1,DNS:localhost")
    p.expired = p.issue("expired", "IP:127.0.0.1,DNS:localhost", days=-1)
    p.wronghost = p.issue("wronghost", "DNS:wrong.example")
    p.kproxy = p.issue("kproxy", "IP:127.0.0.1,DNS:localhost")
    p.kproxy_client = p.issue("kproxy-client", "DNS:kproxy-client")
    p.app = p.issue("app", "DNS:app")
    return p


@pytest.fixture(scope="session")
def kafka(tls_pki):
    """One real Kafka 4.4.0 node (broker+controller): PLAINTEXT, SASL_PLAINTEXT (PLAIN and
    SCRAM-SHA-256), and for test_proxy_tls.py SSL, SASL_SSL (PLAIN, SCRAM-SHA-256/512) and SSL
    listeners with an expired certificate (EXPIRED), one for another host (WRONGHOST), one that
    requires a client certificate (MTLS), and one advertised as "localhost" (BYNAME). One broker
    for all of them instead of a second JVM for the TLS tests."""
    tls = kh.BrokerTls(keystore=tls_pki.broker.keystore, truststore=tls_pki.ca,
                       extra_listeners={"EXPIRED": tls_pki.expired.keystore, "WRONGHOST": tls_pki.wronghost.keystore,
                                        "MTLS": tls_pki.broker.keystore, "BYNAME": tls_pki.broker.keystore})
    # BYNAME advertises the host name "localhost" (the certificate names it), so kproxy's
    # connections to that listener verify a DNS name and send it as SNI.
    cluster = kh.KafkaCluster(1, sasl=True, name="single", tls=tls,
                              advertise=lambda node, listener, host, port: ("localhost", port) if listener == "BYNAME" else None,
                              extra_properties={"listener.name.mtls.ssl.client.auth": "required"})
    yield from _started(cluster, SINGLE_NODE_TIMEOUT_S, "single node")


@pytest.fixture(scope="session")
def kafka_cluster():
    """A real 3-node Kafka 4.4.0 KRaft cluster, every node broker+controller, PLAINTEXT."""
    yield from _started(kh.KafkaCluster(3, name="cluster3"), CLUSTER_TIMEOUT_S, "3-node cluster")


def _say(config, line: str) -> None:
    """A line in the run's output (not captured with the test's output)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
        if reporter is not None:
            reporter.write_line(line)
        else:
            sys.stderr.write(line + "\n")


def ensure_healthy(cluster: kh.KafkaCluster, what: str, test: str, config) -> None:
    """Repairs `cluster` if it is not healthy: restarts its dead nodes and waits for every ISR;
    if that does not do it, stops it and starts it anew (new ports and data). Says so."""
    reason = cluster.health()
    if reason is None:
        return
    _say(config, f"\n[conftest] shared {what} is NOT healthy before {test}: {reason}; repairing it")
    t0 = time.monotonic()
    try:
        cluster.restore(timeout=120)
        action = f"repaired (dead nodes restarted, ISRs full) in {time.monotonic() - t0:.1f}s"
    except kh.KafkaHarnessError as e:
        _say(config, f"[conftest] repairing the shared {what} failed ({e}); restarting it from scratch")
        cluster.stop()
        timeout = dict(SHARED_CLUSTERS.values())[what]
        cluster.start(timeout=timeout)
        action = f"restarted from scratch (new ports, empty) in {time.monotonic() - t0:.1f}s"
    CLUSTER_REPAIRS.append((test, what, reason, action))
    _say(config, f"[conftest] shared {what} {action}")


@pytest.fixture(autouse=True)
def shared_clusters_healthy(request):
    """Before a test that uses a shared cluster: the cluster is healthy (see ensure_healthy)."""
    for name, (what, _timeout) in SHARED_CLUSTERS.items():
        if name in request.fixturenames:
            ensure_healthy(request.getfixturevalue(name), what, request.node.nodeid, request.config)


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique to this test run."""
    base = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:80]
    return f"{base}-{uuid.uuid4().hex[:6]}"


def pytest_terminal_summary(terminalreporter):
    if _WATCHDOG_FIRED.is_set():
        # scripts/test looks for this line (stderr written during a test is captured).
        terminalreporter.write_line(f"{WATCHDOG_MESSAGE}: the session ran longer than {SESSION_LIMIT_S:.0f}s "
                                    f"(KPROXY_INTEGRATION_TIMEOUT) and was interrupted")
    terminalreporter.section("machine, ports, shared clusters")
    terminalreporter.write_line(f"slowness factor (waits scaled by it): {slowness.summary()}")
    terminalreporter.write_line(f"ports: {ports.stats()}")
    terminalreporter.write_line(f"JVM class-data-sharing archives (jvm_cds.py): {jvm_cds.stats()}")
    for test, what, reason, action in CLUSTER_REPAIRS:
        terminalreporter.write_line(f"shared {what} unhealthy before {test}: {reason}; {action}")
    if not CLUSTER_REPAIRS:
        terminalreporter.write_line("shared clusters: healthy before every test that used them")
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
