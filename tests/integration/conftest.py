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
import sys
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import kafka_harness as kh  # noqa: E402

STARTUP_SECONDS: dict = {}
SINGLE_NODE_TIMEOUT_S = 90.0
CLUSTER_TIMEOUT_S = 180.0


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
