"""The kproxy command line: --help, --version, check-config with file:line errors, JSON logs."""

import json
import subprocess

import kafka_harness as kh
from test_proxy_support import Kproxy, kproxy_binary


def _run(*args):
    return subprocess.run([kproxy_binary(), *args], capture_output=True, text=True, timeout=30)


def test_help_and_version():
    r = _run("--help")
    assert r.returncode == 0 and "check-config" in r.stdout
    r = _run("--version")
    assert r.returncode == 0 and r.stdout.startswith("kproxy ")
    r = _run("--bogus")
    assert r.returncode == 2 and "usage" in r.stderr


def test_check_config_reports_file_line_and_reason(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("listeners:\n  - name: k\n    listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_ports: 9100\n")
    r = _run("check-config", str(good))
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("listeners:\n  - name: k\n    listen: 127.0.0.1:99999\n    upstream: b:9092\n    broker_ports: 9100\nlimits: { max_conections: 3 }\n")
    r = _run("check-config", str(bad))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith(f"{bad}:3:13: listeners[0].listen: '127.0.0.1:99999': port must be a number from 1 to 65535"), lines
    assert lines[1].startswith(f"{bad}:6:11: limits.max_conections: unknown key"), lines
    r = _run("--config", str(bad))
    assert r.returncode == 2 and f"{bad}:3:13" in r.stderr


def test_json_logs_are_one_object_per_line_with_connection_ids(kafka):
    with Kproxy(kafka.bootstrap(), name="json", log_format="json") as kp:
        assert kh.metadata("127.0.0.1", kp.port).brokers
        kp.wait_for_log(r"closed: client closed the connection")
        assert kp.stop() == 0
    every = [json.loads(line) for line in kp.log_text().splitlines() if line.strip()]
    # Standard output (merged into this file by the harness) carries the bound addresses, as JSON
    # objects too under JSON logs (proxy/util/bound_report.h); the rest is the log.
    bound = [r for r in every if r.get("kproxy") == "bound"]
    assert {"kind": "listener", "label": "json", "address": kp.bootstrap} in [
        {k: r[k] for k in ("kind", "label", "address")} for r in bound]
    records = [r for r in every if r.get("kproxy") != "bound"]
    assert records and all({"time", "level", "msg"} <= set(r) for r in records)
    closes = [r["msg"] for r in records if " closed: " in r["msg"]]
    assert closes and all(m.startswith("conn=") for m in closes)
