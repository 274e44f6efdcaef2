"""`kproxy check-config FILE` and `kproxy --config FILE` agree on every config (issue #15 bug 3).

Each config is run both ways: check-config's exit status and stderr, and a real start (which
either listens, and is stopped with SIGTERM, or exits). A file check-config passes must start; a
file it refuses (exit 2) must be refused by the start too, with exit 2 and the same
file:line:column lines. The configs are config/examples/*.yaml, the configs the Kproxy test helper
writes (the ones found under build/test-logs from earlier tests, plus a fresh set covering its
options), and a set of bad files, one per validation. Fixed ports in the examples are replaced by
ports from ports.py. No broker is needed: kproxy connects upstream only when a client arrives.
"""

import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import kafka_harness as kh
import ports
import slowness
from test_proxy_support import LOG_ROOT, Kproxy, kproxy_binary

EXAMPLES = kh.REPO_ROOT / "config" / "examples"
# Configs the Kproxy helper wrote in earlier tests of this or past runs (newest first, bounded so
# the test stays short).
MAX_FOUND = 40


def _remap_ports(text: str) -> str:
    """The config with every listen port, broker_ports base and broker_port_range moved to ports
    reserved for this test (the same old port always maps to the same new one)."""
    singles: Dict[int, int] = {}

    def single(old: int) -> int:
        if old not in singles:
            singles[old] = ports.free_port()
        return singles[old]

    def listen(m: re.Match) -> str:
        return f"{m.group(1)}{m.group(2)}:{single(int(m.group(3)))}"

    def base(m: re.Match) -> str:
        return f"{m.group(1)}{ports.port_block(33)}"

    def port_range(m: re.Match) -> str:
        first, last = int(m.group(2)), int(m.group(3))
        new = ports.port_block(last - first + 1)
        return f"{m.group(1)}{new}-{new + last - first}"

    text = re.sub(r"(\blisten:\s*)(\S+?|\[[^\]]+\]):(\d+)\b", listen, text)
    text = re.sub(r"(\bbroker_ports:\s*)(\d+)\b", base, text)
    text = re.sub(r"(\bbroker_port_range:\s*)(\d+)-(\d+)\b", port_range, text)
    return text


def _check(path: Path) -> Tuple[int, List[str]]:
    r = subprocess.run([kproxy_binary(), "check-config", str(path)], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stderr.splitlines()


def _start(path: Path, port: int) -> Tuple[int, List[str]]:
    """Starts kproxy on `path`: (0, []) when it listened on `port` and stopped cleanly on SIGTERM,
    else its exit status and stderr lines (-1: still starting at the deadline, then killed)."""
    proc = subprocess.Popen([kproxy_binary(), "--config", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, preexec_fn=kh._child_setup)
    deadline = time.monotonic() + slowness.scaled(15.0)
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return proc.returncode, proc.stderr.read().splitlines()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    pass
            except OSError:
                time.sleep(0.05)
                continue
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=slowness.scaled(30.0))
            assert proc.returncode == 0, err
            return 0, []
        return -1, [f"neither listened on {port} nor exited within the deadline"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _first_listen_port(text: str) -> int:
    m = re.search(r"\blisten:\s*\S+?:(\d+)\b", text)
    assert m, text
    return int(m.group(1))


def _agree(path: Path) -> str:
    """Runs both: "ok" (both pass), "refused" (both refuse alike), else what differs."""
    text = path.read_text()
    check_rc, check_err = _check(path)
    start_rc, start_err = _start(path, _first_listen_port(text))
    errors = [line for line in check_err if ": warning: " not in line]
    start_errors = [line for line in start_err if ": warning: " not in line]
    if check_rc == 0:
        if start_rc != 0:
            return f"check-config OK, the start exited {start_rc}: {start_err[-3:]}"
        return "ok" if not errors else f"check-config exited 0 with errors: {errors}"
    if check_rc != 2:
        return f"check-config exited {check_rc}: {check_err}"
    if start_rc != 2:
        return f"check-config refused it (2), the start exited {start_rc}: {start_err[-3:]}"
    if not errors or not all(line.startswith(f"{path}:") for line in errors):
        return f"check-config's errors do not name the file: {errors}"
    if start_errors != errors:
        return f"different errors: check-config {errors}, start {start_errors}"
    return "refused"


def _found_configs() -> List[Path]:
    found = sorted(LOG_ROOT.glob("*/kproxy.yaml"), key=lambda p: p.stat().st_mtime, reverse=True)
    seen, out = set(), []
    for p in found:
        # Same shape, other ports: one of each is enough.
        shape = re.sub(r"\d+", "N", p.read_text())
        if shape not in seen:
            seen.add(shape)
            out.append(p)
    return out[:MAX_FOUND]


def _helper_configs() -> List[str]:
    """The configs the Kproxy helper writes, over its options (none is started here)."""
    variants = [
        {},
        {"port_range": True},
        {"workers": 1, "log_format": "json", "limits": {"max_connections": "3", "connect_timeout": "500ms"}},
        {"extra_yaml": "faults:\n  - name: f\n    match: { api: Produce }\n    action: { error: NOT_LEADER_OR_FOLLOWER }\n"
                       "api_versions:\n  - { api: Produce, max: 9 }\n"},
        {"all_upstreams": True, "listener_yaml": "    max_broker_ports: 16\n"},
    ]
    out = []
    for v in variants:
        kp = Kproxy("127.0.0.1:1,127.0.0.1:2", name="agreement", **v)
        out.append(kp.config_text)
    return out


def _bad_configs() -> Dict[str, str]:
    """One file per validation the start runs; ports are reserved for this test."""
    p = ports.free_ports(4)
    block = ports.port_block(8)
    listener = (f"listeners:\n  - name: a\n    listen: 127.0.0.1:{p[0]}\n    upstream: 127.0.0.1:1\n"
                f"    broker_ports: {block}\n")
    two = (f"listeners:\n  - name: a\n    listen: 127.0.0.1:{p[0]}\n    upstream: 127.0.0.1:1\n"
           f"    broker_port_range: {block}-{block + 3}\n"
           f"  - name: b\n    listen: 127.0.0.1:{p[1]}\n    upstream: 127.0.0.1:2\n"
           f"    broker_port_range: {block}-{block + 3}\n")
    return {
        "fault-unknown-api": listener + "faults:\n  - {name: x, match: {api: Produkt}, action: {error: PRODUCER_FENCED}}\n",
        "fault-unknown-error": listener + "faults:\n  - {name: x, match: {api: Produce}, action: {error: BOGUS}}\n",
        "api-versions-bad": listener + "api_versions:\n  - { api: Produce, max: many }\n",
        "admin-on-listener-port": listener + f"admin: {{ listen: 127.0.0.1:{p[0]} }}\n",
        "overlapping-ranges": two,
        "same-base": listener + f"  - name: b\n    listen: 127.0.0.1:{p[1]}\n    upstream: 127.0.0.1:2\n    broker_ports: {block}\n",
        "duplicate-key": listener + "workers: 1\nworkers: 2\n",
        "alias-bomb": listener + "faults:\n  - &a [x, x, x, x, x, x, x, x, x, x]\n"
                      + "".join(f"  - &a{i} [{', '.join(['*a' if i == 1 else f'*a{i - 1}'] * 10)}]\n" for i in range(1, 8)),
        "unknown-key": listener + "limits: { max_conections: 3 }\n",
        "missing-tls-file": listener + "    tls: { cert: /nonexistent/c.pem, key: /nonexistent/k.pem }\n",
    }


def test_check_config_and_start_agree_on_every_config(tmp_path):
    results = {}
    sources = [(f"example-{p.stem}", p.read_text()) for p in sorted(EXAMPLES.glob("*.yaml"))]
    sources += [(f"found-{i}", p.read_text()) for i, p in enumerate(_found_configs())]
    sources += [(f"helper-{i}", t) for i, t in enumerate(_helper_configs())]
    assert len(sources) >= 9
    for name, text in sources:
        path = tmp_path / f"{name}.yaml"
        path.write_text(_remap_ports(text))
        results[name] = _agree(path)
    for name, text in _bad_configs().items():
        path = tmp_path / f"bad-{name}.yaml"
        path.write_text(text)
        results[f"bad-{name}"] = _agree(path)
    print(results)
    disagree = {name: r for name, r in results.items() if r not in ("ok", "refused")}
    assert not disagree, "\n".join(f"{name}: {r}" for name, r in disagree.items())
    assert all(results[name] == "refused" for name in results if name.startswith("bad-")), results
    # The examples that need no files of the host start (tls.yaml names PEM files under /etc).
    assert results["example-sidecar"] == "ok" and results["example-chaos"] == "ok"
    assert results["example-two-clusters"] == "ok"
    assert all(results[f"helper-{i}"] == "ok" for i in range(5)), results


def test_check_config_warnings_do_not_change_the_exit_status(tmp_path):
    """Ports inside the kernel's ephemeral range are a warning (issue #15 bug 10): exit 0 both ways."""
    lo, hi = ports.ephemeral_range()
    # Only the (reserved) listen port is bound: the broker ports near the ephemeral range are
    # opened only when a broker is discovered, and no broker is.
    path = tmp_path / "ephemeral.yaml"
    path.write_text(f"listeners:\n  - name: a\n    listen: 127.0.0.1:{ports.free_port()}\n    upstream: 127.0.0.1:1\n"
                    f"    broker_ports: {lo - 2}\n    max_broker_ports: 4\n")
    rc, err = _check(path)
    assert rc == 0, err
    assert any(line.startswith(f"{path}:5:19: warning: listeners[0].broker_ports: ports {lo - 2}-{lo + 1} (base + node ids 0-3) "
                               f"overlap the kernel's ephemeral port range {lo}-{hi}") for line in err), err
    assert _agree(path) == "ok"
