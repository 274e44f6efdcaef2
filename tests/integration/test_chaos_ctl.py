"""`kproxy ctl` against a running kproxy's admin API (no broker needed: the calls only change
kproxy's rule set). Checks the exit status, what is printed, and that each change is what the
admin API then reports."""

import json
import os
import subprocess

import pytest

import kafka_harness as kh
from test_chaos_support import ChaosKproxy
from test_proxy_support import kproxy_binary

TOKEN = "ctl-test-token"


def _ctl(kp, *args, token=TOKEN, stdin=None):
    cmd = [kproxy_binary(), "ctl", "--admin", f"127.0.0.1:{kp.admin_port}"] + (["--token", token] if token else []) + list(args)
    env = {k: v for k, v in os.environ.items() if k != "KPROXY_ADMIN_TOKEN"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, input=stdin, env=env)


@pytest.fixture
def kp(monkeypatch):
    monkeypatch.setenv("KPROXY_ADMIN_TOKEN", TOKEN)  # the server's token (inherited by kproxy)
    with ChaosKproxy("127.0.0.1:1", name="ctl", log_level="info", token=TOKEN) as proxy:
        yield proxy
        assert proxy.stop() == 0


def test_ctl_manages_fault_rules(kp, tmp_path):
    r = _ctl(kp, "faults", "put", "slow", '{"match":{"api":"Produce"},"action":{"delay":"150ms"}}')
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rule"]["name"] == "slow"
    rule_file = tmp_path / "rule.json"
    rule_file.write_text('{"match":{"api":"EndTxn"},"action":{"answer":"CONCURRENT_TRANSACTIONS"},"trigger":{"times":2}}')
    assert _ctl(kp, "faults", "put", "busy", f"@{rule_file}").returncode == 0
    assert _ctl(kp, "faults", "put", "cut", "-", stdin='{"action":{"slice":64}}').returncode == 0
    listed = json.loads(_ctl(kp, "--json", "faults", "list").stdout)
    # Without --json: a table a person reads (issue #30), one row per rule under a header.
    table = _ctl(kp, "faults", "list").stdout.splitlines()
    assert table[0].split() == ["NAME", "API", "ACTION", "TRIGGER", "HITS", "INJECTED"], table
    rows = {line.split()[0]: line for line in table[1:]}
    assert set(rows) == {"slow", "busy", "cut"}, table
    assert "Produce" in rows["slow"] and "delay=150ms" in rows["slow"], rows["slow"]
    assert [f["name"] for f in listed["faults"]] == ["slow", "busy", "cut"]
    got = json.loads(_ctl(kp, "faults", "get", "busy").stdout)
    assert (got["hits"], got["injected"], got["trigger"]) == (0, 0, {"times": 2})

    bad = _ctl(kp, "faults", "put", "bad", '{"match":{"api":"EndTxnn"},"action":{"error":"NOT_COORDINATOR"}}')
    assert bad.returncode == 1
    assert "HTTP 400: match.api: unknown API 'EndTxnn'" in bad.stderr, bad.stderr
    malformed = _ctl(kp, "faults", "put", "bad", "{not json")
    assert malformed.returncode == 1 and "HTTP 400: malformed JSON" in malformed.stderr, malformed.stderr

    deleted = _ctl(kp, "faults", "delete", "slow")
    assert (deleted.returncode, deleted.stdout.strip()) == (0, "ok")
    again = _ctl(kp, "faults", "delete", "slow")
    assert again.returncode == 1 and "HTTP 404: no fault rule named 'slow'" in again.stderr
    assert json.loads(_ctl(kp, "faults", "reset").stdout) == {"removed": 2}
    assert kp.admin("GET", "/faults")[1]["faults"] == []


def test_ctl_api_versions_reload_token_and_errors(kp):
    put = _ctl(kp, "api-versions", "put", '[{"api":"Produce","max":9}]')
    assert put.returncode == 0, put.stderr
    got = json.loads(_ctl(kp, "api-versions", "get").stdout)
    assert got["api_versions"][0]["max"] == 9
    assert _ctl(kp, "reload").returncode == 0

    no_token = _ctl(kp, "faults", "list", token=None)
    assert no_token.returncode == 1
    assert "HTTP 401" in no_token.stderr and "--token" in no_token.stderr, no_token.stderr

    usage = _ctl(kp, "faults", "put", "x")
    assert usage.returncode == 2 and "expected: kproxy ctl faults put NAME RULE" in usage.stderr
    help_ = subprocess.run([kproxy_binary(), "ctl", "--help"], capture_output=True, text=True, timeout=30)
    assert help_.returncode == 0 and "faults put NAME RULE" in help_.stdout

    closed_port = kh.free_ports(1)[0]
    down = subprocess.run([kproxy_binary(), "ctl", "--admin", f"127.0.0.1:{closed_port}", "faults", "list"],
                          capture_output=True, text=True, timeout=30)
    assert down.returncode == 1 and f"cannot connect to 127.0.0.1:{closed_port}" in down.stderr, down.stderr
