"""HAProxy in TCP mode in front of kproxy, for the tests that need a real load balancer in
front of it (PROXY protocol v2, TLS ended at the load balancer, several replicas behind one
port)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import slowness


def start_haproxy_tcp(cfg: Path, front: int, backend: str, bind_options: str = "", defaults: str = "",
                      maxconn: int = 200) -> subprocess.Popen:
    """Writes `cfg` (frontend `fe` on 127.0.0.1:`front` with `bind_options`, e.g. "ssl crt X";
    backend `be` made of the lines `backend`; `defaults` adds lines to the defaults section) and
    starts HAProxy with it in the foreground. Returns once `front` accepts; an HAProxy that exits
    or never listens is stopped and fails the test."""
    cfg.write_text(
        f"global\n  maxconn {maxconn}\n"
        "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n" + defaults +
        f"frontend fe\n  bind 127.0.0.1:{front}{' ' + bind_options if bind_options else ''}\n  default_backend be\n"
        f"backend be\n{backend}")
    proc = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + slowness.scaled(10)
    while True:
        try:
            socket.create_connection(("127.0.0.1", front), timeout=0.5).close()
            return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise AssertionError(f"haproxy did not listen on {front} ({cfg})")
            time.sleep(0.05)
