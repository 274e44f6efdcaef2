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
CLUSTER_TIMEOUT_S = 180.0


def pytest_sessionstart(session):
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


@pytest.fixture(scope="session")
def kafka():
    """One real Kafka 4.4.0 node (broker+controller), PLAINTEXT + SASL_PLAINTEXT."""
    cluster = kh.KafkaCluster(1, sasl=True, name="single")
    try:
        cluster.start(timeout=SINGLE_NODE_TIMEOUT_S)
        STARTUP_SECONDS["single node"] = cluster.startup_seconds
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_cluster():
    """A real 3-node Kafka 4.4.0 KRaft cluster, every node broker+controller, PLAINTEXT."""
    cluster = kh.KafkaCluster(3, name="cluster3")
    try:
        cluster.start(timeout=CLUSTER_TIMEOUT_S)
        STARTUP_SECONDS["3-node cluster"] = cluster.startup_seconds
        yield cluster
    finally:
        cluster.stop()


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
