"""The harness itself: advertised addresses, cleanup on every path, the scripts/kafka CLI."""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import kafka_harness as kh

pytestmark = pytest.mark.harness


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it no longer runs.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_until(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


def test_advertised_address_and_cleanup_after_context_manager():
    fake_port = kh.free_ports(1)[0]
    with kh.KafkaCluster(1, name="advertise", advertise={1: ("127.0.0.2", fake_port)}) as k:
        node = k.nodes[0]
        md = k.metadata()
        # Clients are told the configured address; the real listener still serves.
        assert md.brokers == {1: ("127.0.0.2", fake_port)}
        assert k.advertised_bootstrap() == f"127.0.0.2:{fake_port}"
        # Inter-broker traffic keeps working: a transaction-free topic gets a leader.
        t = k.create_topic("adv-check", partitions=2)
        assert {p.leader for p in t.partitions.values()} == {1}
        # health() names a killed node; restore() brings it back on the same ports and data.
        assert k.health() is None
        k.kill_node(1)
        assert k.health().startswith("node 1 is not running")
        # Restored from a thread that then ends, as a thread pool's worker does: the node must
        # outlive it (PR_SET_PDEATHSIG follows the forking thread; the harness forks from its own).
        worker = threading.Thread(target=k.restore, kwargs={"timeout": 90})
        worker.start()
        worker.join()
        assert k.health() is None
        restarted = node.proc.pid
        assert not _wait_until(lambda: not _pid_alive(restarted), 3), "the restarted node died with the thread that restarted it"
        assert k.health() is None
        assert set(k.metadata(["adv-check"]).topics["adv-check"].partitions) == {0, 1}
        pid = node.proc.pid
        ports = list(node.ports.values())
        data_dir = node.data_dir
        log = node.log_path
        assert data_dir.exists()
    assert not _pid_alive(pid)
    assert not any(_port_open(p) for p in ports)
    assert not data_dir.exists()
    assert log.exists() and log.stat().st_size > 0, "logs are kept after stop"


def test_jvm_dies_with_a_sigkilled_harness_process():
    """PR_SET_PDEATHSIG: even a SIGKILLed Python harness takes its broker with it."""
    code = textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {str(Path(kh.__file__).parent)!r})
        import kafka_harness as kh
        k = kh.KafkaCluster(1, name="orphan").start()
        n = k.nodes[0]
        print(json.dumps({{"pid": n.proc.pid, "port": n.ports["PLAINTEXT"], "data": str(n.data_dir)}}), flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL, text=True)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 90)
        assert ready, "harness child did not report a started broker within 90 s"
        info = json.loads(child.stdout.readline())
        assert _pid_alive(info["pid"]) and _port_open(info["port"])
        child.kill()
        child.wait(timeout=10)
        assert _wait_until(lambda: not _pid_alive(info["pid"]), 15), "orphaned JVM still running"
        # The last JVM thread releases the sockets a moment after the leader turns zombie.
        assert _wait_until(lambda: not _port_open(info["port"]), 15)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_cli_start_prints_addresses_and_stops_on_ctrl_c():
    script = kh.REPO_ROOT / "scripts" / "kafka"
    proc = subprocess.Popen([str(script), "start", "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 90)
        assert ready, "scripts/kafka start printed nothing within 90 s"
        info = json.loads(proc.stdout.readline())
        host, _, port = info["bootstrap"].rpartition(":")
        assert kh.metadata(host, int(port)).brokers  # a real broker answers
        pid = info["nodes"]["1"]["pid"]
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        assert proc.wait(timeout=30) == 130
        assert _wait_until(lambda: not _pid_alive(pid), 10)
        assert _wait_until(lambda: not _port_open(int(port)), 15)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_log_pruning_keeps_the_runs_of_live_harness_processes(tmp_path, monkeypatch):
    """Past KEEP_LOG_RUNS the oldest run directories go, but never one whose harness process
    still runs (its brokers write there; a killed node restarts there)."""
    monkeypatch.setattr(kh, "LOG_ROOT", tmp_path)
    monkeypatch.setattr(kh, "KEEP_LOG_RUNS", 2)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        dead = subprocess.Popen(["true"])
        dead.wait()
        runs = [f"20261206-000000-{sleeper.pid}-conformance-aaaaaa", f"20261206-000001-{dead.pid}-old-bbbbbb",
                "20261206-000002-notapid-odd-cccccc", f"20261206-000003-{dead.pid}-newer-dddddd",
                f"20261206-000004-{dead.pid}-newest-eeeeee"]
        for i, name in enumerate(runs):
            (tmp_path / name).mkdir()
            os.utime(tmp_path / name, (1_000_000 + i, 1_000_000 + i))
        kh._prune_logs()
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == sorted([runs[0], runs[3], runs[4]]), left
    finally:
        sleeper.kill()
        sleeper.wait()
