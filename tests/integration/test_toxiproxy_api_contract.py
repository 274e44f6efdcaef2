"""kproxy's Toxiproxy API against its contract, docs/toxiproxy-api.openapi.yaml (issue #34), on a
live kproxy with `toxiproxy.listen` set, as test_admin_api_contract.py does for the admin API:

- kproxy serves the repository's document at GET /openapi.json on the toxiproxy port;
- every documented operation answers (not the HTTP server's "no such endpoint", not 405), and a
  documented path refuses an undocumented method with 405 (derived from the document);
- schemathesis (pinned in scripts/setup, venv .cache/venv-schemathesis) generates valid and invalid
  requests for every operation, plus stateful sequences along the document's links (create a
  proxy, read, change and delete it, add a toxic to it, read and delete that). Pass: no 5xx, every
  response conforms to its documented status, content type, headers and schema, invalid input is
  refused, and the API still creates a working proxy afterwards. Every check schemathesis has
  (`--checks all`), two fixed seeds; KPROXY_SCHEMATHESIS_SEED runs one other seed instead.

Generated addresses are turned into loopback ones right before each request
(schemathesis_toxiproxy_hooks.py): proxies listen and probe on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import kafka_harness as kh
import slowness
from test_proxy_support import Kproxy
from test_toxiproxy_tcp import EchoServer
from schemathesis_report import run_numbers

DOC = kh.REPO_ROOT / "docs" / "toxiproxy-api.openapi.yaml"
ST = kh.REPO_ROOT / ".cache" / "venv-schemathesis" / "bin" / "st"
METHODS = ("get", "put", "post", "delete", "patch")
MAX_EXAMPLES = int(os.environ.get("KPROXY_SCHEMATHESIS_MAX_EXAMPLES", "100"))
TIME_LIMIT_S = float(os.environ.get("KPROXY_SCHEMATHESIS_TIME_LIMIT", "420"))
HERE = Path(__file__).resolve().parent


def _load_document() -> dict:
    sys.path.insert(0, str(kh.REPO_ROOT / "cmake"))
    try:
        import embed_openapi  # the build's own YAML reading (YAML 1.2 booleans)
    finally:
        sys.path.pop(0)
    return embed_openapi.load(str(DOC))


def _call(base: str, method: str, path: str, body: bytes | None = None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    req = urllib.request.Request(base + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=slowness.scaled(10)) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


@pytest.fixture
def api():
    # The Kafka listener's upstream is never dialled here (no Kafka client connects).
    kp = Kproxy("127.0.0.1:9", name="toxi-contract", log_level="info",
                extra_yaml="toxiproxy: { listen: 127.0.0.1:0, max_proxies: 32 }\n")
    with kp:
        address = kp.wait_bound("toxiproxy", "api")
        yield kp, f"http://{address}"
        assert kp.alive(), kp.log_text()[-3000:]


def test_kproxy_serves_the_repository_document(api):
    _, base = api
    status, raw, headers = _call(base, "GET", "/openapi.json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(raw) == _load_document()


def test_documented_operations_are_served_and_other_methods_get_405(api):
    _, base = api
    doc = _load_document()
    probe = {"/proxies/{proxy}": "/proxies/contract-probe", "/proxies/{proxy}/toxics": "/proxies/contract-probe/toxics",
             "/proxies/{proxy}/toxics/{toxic}": "/proxies/contract-probe/toxics/t"}
    seen = 0
    for path, item in doc["paths"].items():
        target = probe.get(path, path)
        documented = {m for m in item if m in METHODS}
        for method in METHODS:
            body = b"{}" if method in ("put", "post", "patch") else None
            if path == "/populate" and method == "post":
                body = b"[]"
            status, raw, headers = _call(base, method.upper(), target, body)
            if method in documented:
                assert status != 405 and not raw.startswith(b'{"error":"no such endpoint'), (method, path, status, raw)
                assert str(status) in item[method]["responses"], (method, path, status, raw)
                seen += 1
            else:
                assert status == 405 and headers["Allow"], (method, path, status, raw)
    assert seen == 16, seen  # Toxiproxy v2's 15 operations (POST as PATCH counted) and GET /openapi.json


def _assert_still_serves(base: str) -> None:
    """After the run: /reset works, and a new proxy forwards bytes to an echo server."""
    status, raw, _ = _call(base, "GET", "/proxies")
    for name in json.loads(raw):
        assert _call(base, "DELETE", "/proxies/" + urllib.request.quote(name, safe=""))[0] == 204, name
    assert _call(base, "POST", "/reset")[0] == 204
    echo = EchoServer()
    try:
        status, raw, _ = _call(base, "POST", "/proxies",
                               json.dumps({"name": "after", "upstream": f"127.0.0.1:{echo.port}", "listen": "127.0.0.1:0"}).encode())
        assert status == 201, raw
        host, port = json.loads(raw)["listen"].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=slowness.scaled(5)) as s:
            s.settimeout(slowness.scaled(5))
            s.sendall(b"still here")
            got = b""
            while len(got) < 10:
                chunk = s.recv(10 - len(got))
                assert chunk, got
                got += chunk
            assert got == b"still here"
    finally:
        echo.close()
    assert _call(base, "DELETE", "/proxies/after")[0] == 204


SEEDS = [int(os.environ["KPROXY_SCHEMATHESIS_SEED"])] if os.environ.get("KPROXY_SCHEMATHESIS_SEED") else [20261204, 20261205]


@pytest.mark.parametrize("seed", SEEDS)
def test_schemathesis_finds_no_server_error_nor_contract_violation(api, tmp_path, seed):
    kp, base = api
    if not ST.exists():
        pytest.fail(f"schemathesis is not installed at {ST}: run scripts/setup")
    print(f"\n[schemathesis] seed {seed} (replay: KPROXY_SCHEMATHESIS_SEED={seed}), max {MAX_EXAMPLES} examples per operation")
    report = tmp_path / "report"
    cmd = [str(ST), "--config-file", str(HERE / "schemathesis-toxiproxy.toml"), "run", f"{base}/openapi.json",
           "--checks", "all",
           "--phases", "examples,coverage,fuzzing,stateful",
           "--max-examples", str(MAX_EXAMPLES), "--seed", str(seed),
           "--generation-database", "none", "--request-timeout", "20", "--workers", "1",
           "--report", "junit,ndjson", "--report-dir", str(report),
           "--no-color", "--output-truncate", "true"]
    env = {**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": "schemathesis_toxiproxy_hooks",
           "PYTHONPATH": str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIME_LIMIT_S, env=env, cwd=tmp_path,
                              preexec_fn=kh._child_setup)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"schemathesis (seed {seed}) ran over {TIME_LIMIT_S}s:\n{(e.stdout or '')[-6000:]}")
    elapsed = time.monotonic() - t0
    output = proc.stdout + proc.stderr
    logs = kh.REPO_ROOT / "build" / "test-logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"schemathesis-toxiproxy-{seed}.log").write_text(f"seed {seed}\n{' '.join(cmd)}\n\n{output}")
    print(output[-4000:])
    numbers = run_numbers(report)
    print(f"[schemathesis] seed {seed}, {elapsed:.1f}s, exit {proc.returncode}, {json.dumps(numbers)}")
    assert proc.returncode == 0, f"schemathesis found problems (seed {seed}); see build/test-logs/schemathesis-toxiproxy-{seed}.log:\n{output[-8000:]}"
    assert numbers["phases"].get("stateful", {}).get("requests", 0) > 0, numbers  # the links were followed
    assert kp.alive(), kp.log_text()[-3000:]
    _assert_still_serves(base)
