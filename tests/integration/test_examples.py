"""The examples for test authors (examples/, README "Driving kproxy from your tests") run here
against the session's real broker, each as its user would run it: `pytest examples/pytest` and
`go test ./...` in examples/go, with KPROXY_BIN and KAFKA_BOOTSTRAP set."""

import os
import shutil
import subprocess
import sys

import pytest

import kafka_harness as kh
from test_proxy_support import kproxy_binary

EXAMPLES = kh.REPO_ROOT / "examples"


def _env(kafka):
    return {**os.environ, "KPROXY_BIN": kproxy_binary(), "KAFKA_BOOTSTRAP": kafka.bootstrap()}


def test_pytest_example(kafka):
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(EXAMPLES / "pytest")],
                       capture_output=True, text=True, timeout=300, env=_env(kafka), cwd=EXAMPLES / "pytest",
                       preexec_fn=kh._child_setup)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "1 passed" in r.stdout and "skipped" not in r.stdout, r.stdout[-2000:]


def test_go_example(kafka):
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if not go:
        pytest.skip("no Go toolchain (examples/go needs only the standard library)")
    # Go's own build cache (GOCACHE's default, ~/.cache/go-build) is shared by every checkout:
    # a second clone does not compile the standard library again.
    env = {**_env(kafka), "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOPROXY": "off"}
    r = subprocess.run([go, "test", "-count=1", "-v", "./..."], capture_output=True, text=True, timeout=300, env=env,
                       cwd=EXAMPLES / "go", preexec_fn=kh._child_setup)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "--- PASS: TestDelayInjectedOnce" in r.stdout, r.stdout[-2000:]
