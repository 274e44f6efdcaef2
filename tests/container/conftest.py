"""Fixtures of the container stage (tests/container/run). The Kafka harness, Java clients and
kproxy test helpers come from tests/integration; the tools from .cache/container (built by
tests/container/k8s-tools/build, the image by tests/container/build-image)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))

CACHE = Path(os.environ.get("KPROXY_CONTAINER_CACHE", ROOT / ".cache" / "container"))
BIN = CACHE / "bin"
PODMAN = HERE / "podman"
IMAGE = os.environ.get("KPROXY_CONTAINER_IMAGE", "localhost/kproxy:test")
CONTAINER_PREFIX = os.environ.get("KPROXY_CONTAINER_PREFIX", f"kproxy-test-{os.getpid()}")
LOGS = ROOT / "build" / "test-logs" / "container"


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = Path(str(item.fspath)).name
        item.add_marker(pytest.mark.manifests if name == "test_manifests.py" else pytest.mark.container)


def tool(name: str) -> str:
    path = BIN / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} missing: run tests/container/k8s-tools/build")
    return str(path)
