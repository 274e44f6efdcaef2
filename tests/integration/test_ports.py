"""ports.py, the one source of the tests' listener ports: outside the kernel's ephemeral range,
never the same port for two concurrent processes, never a port something listens on. No broker."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import ports

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.harness

# A process that takes ports, prints them, and keeps its reservation until its stdin closes.
_TAKER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import ports
got = ports.free_ports(40) + [b + i for b in (ports.port_block(9) for _ in range(5)) for i in range(9)]
print(json.dumps(got), flush=True)
sys.stdin.read()
"""


def test_the_pool_is_outside_the_ephemeral_range():
    lo, hi = ports.pool()
    eph_lo, eph_hi = ports.ephemeral_range()
    assert (eph_lo, eph_hi) == tuple(int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert hi < eph_lo or lo > eph_hi, ((lo, hi), (eph_lo, eph_hi))
    assert lo >= 1024
    for p in ports.free_ports(5) + [ports.port_block(9)]:
        assert lo <= p <= hi and not eph_lo <= p <= eph_hi


def test_concurrent_processes_never_get_the_same_port():
    procs = [subprocess.Popen([sys.executable, "-c", _TAKER, str(HERE)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        taken = [json.loads(p.stdout.readline()) for p in procs]
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(30)
    mine = set(ports.free_ports(40))
    sets = [set(t) for t in taken] + [mine]
    assert all(len(s) == 85 for s in sets[:3]) and len(mine) == 40
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            assert not sets[i] & sets[j], f"processes {i} and {j} both got {sorted(sets[i] & sets[j])[:5]}"


def test_a_port_in_use_is_never_handed_out():
    p = ports.free_port()
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            squatter.bind(("127.0.0.1", p + 1))
        except OSError:
            pytest.skip(f"port {p + 1} is in use already")
        squatter.listen(1)
        nxt = ports.free_ports(3)
        block = ports.port_block(4)
        assert p + 1 not in nxt and not block <= p + 1 < block + 4
        assert p not in nxt  # and nothing twice
