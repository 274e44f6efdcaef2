"""Listening ports for the integration tests: every broker, controller and kproxy listener port
(and kproxy's broker_ports blocks) comes from here. Python 3 standard library only.

    import ports
    ports.free_ports(3)        # [21400, 21401, 21402]: three ports nobody listens on
    ports.port_block(9)        # 21403: 21403 .. 21411 are all free

Why not "bind port 0 and release it": such a port comes from the kernel's ephemeral range
(/proc/sys/net/ipv4/ip_local_port_range), so between the release and the moment the broker or
kproxy binds it, or while a killed broker is down, any outgoing connection on the machine can
take it ("Address already in use"). Ports from here are

* outside the ephemeral range: a pool below its low end (or above its high end when there is
  more room there), never below LOWEST_PORT, so no outgoing connection ever gets one;
* reserved across processes: the pool is cut into slabs of SLAB_SIZE ports, and a process hands
  out ports only from slabs it holds an exclusive flock on (a file per slab in LOCK_DIR). The
  kernel drops the lock when the process exits, however it exits, so a crashed run never leaks
  a reservation; two test runs on one machine never hand out the same port;
* handed out once per process (a cursor moves through the process's slabs; ports are reused
  only when the whole pool is leased, and then still bind-checked);
* bind-checked: a port is handed out only if a listening socket can be opened on it right now
  (SO_REUSEADDR, as Kafka and kproxy bind theirs).

$KPROXY_TEST_PORTS=LO-HI sets the pool explicitly; $KPROXY_TEST_PORT_LOCKS the lock directory.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
import threading
from pathlib import Path
from typing import List, Optional, Tuple

SLAB_SIZE = 200
LOWEST_PORT = 12000  # well clear of the well-known ports and of common services' (5432, 6379, 8080, 9092, ...)
LOCK_DIR = Path(os.environ.get("KPROXY_TEST_PORT_LOCKS", "/tmp/kproxy-test-ports"))
EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


class PortError(RuntimeError):
    pass


def ephemeral_range() -> Tuple[int, int]:
    """The kernel's ephemeral port range (Linux default 32768-60999)."""
    try:
        lo, hi = (int(x) for x in Path(EPHEMERAL_RANGE_FILE).read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def pool() -> Tuple[int, int]:
    """The inclusive port range the tests take their ports from."""
    env = os.environ.get("KPROXY_TEST_PORTS")
    if env:
        lo, _, hi = env.partition("-")
        try:
            return int(lo), int(hi)
        except ValueError:
            raise PortError(f"KPROXY_TEST_PORTS={env!r}: want LO-HI") from None
    eph_lo, eph_hi = ephemeral_range()
    below = (LOWEST_PORT, eph_lo - 1)
    above = (eph_hi + 1, 65535)
    best = max((below, above), key=lambda r: r[1] - r[0])
    if best[1] - best[0] + 1 < 4 * SLAB_SIZE:
        raise PortError(f"no room for test ports outside the ephemeral range {eph_lo}-{eph_hi} "
                        f"({EPHEMERAL_RANGE_FILE}); set KPROXY_TEST_PORTS=LO-HI")
    return best


def can_listen(port: int, host: str = "127.0.0.1") -> bool:
    """True if a listening socket can be opened on host:port right now (SO_REUSEADDR, as the
    brokers and kproxy open theirs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen(1)
            return True
        except OSError:
            return False


class _Allocator:
    def __init__(self):
        self.lo, self.hi = pool()
        self.slab_count = (self.hi - self.lo + 1) // SLAB_SIZE
        self.slabs: List[Tuple[int, int]] = []  # (first port, lock fd), in lease order
        self.current = -1                       # index into slabs of the slab the cursor is in
        self.cursor = 0
        self.handed_out = 0
        self.wrapped = False
        self.lock = threading.Lock()

    def _slab_start(self, index: int) -> int:
        return self.lo + index * SLAB_SIZE

    def _lease(self) -> bool:
        """Takes one more slab (an exclusive flock on its file); False if every slab is held."""
        try:
            LOCK_DIR.mkdir(parents=True, exist_ok=True)
            os.chmod(LOCK_DIR, 0o1777)
        except OSError:
            pass
        held = {start for start, _fd in self.slabs}
        first = random.randrange(self.slab_count)
        for k in range(self.slab_count):
            start = self._slab_start((first + k) % self.slab_count)
            if start in held:
                continue
            path = LOCK_DIR / f"slab-{start}-{start + SLAB_SIZE - 1}.lock"
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            except PermissionError:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                    continue
                raise
            with os.fdopen(os.dup(fd), "w") as f:  # who holds it, for a human looking at the file
                f.write(f"pid {os.getpid()}\n")
            self.slabs.append((start, fd))
            return True
        return False

    def _next_slab(self) -> None:
        if self.current + 1 < len(self.slabs) or self._lease():
            self.current += 1
        elif self.slabs:
            # Every slab of the pool is held (by us or by other runs): reuse ours from the start;
            # the bind check still keeps ports in use out.
            self.wrapped = True
            self.current = 0 if self.current + 1 >= len(self.slabs) else self.current + 1
        else:
            raise PortError(f"every slab of the test port pool {self.lo}-{self.hi} is leased by other "
                            f"processes (lock files in {LOCK_DIR})")
        self.cursor = self.slabs[self.current][0]

    def block(self, count: int, host: str) -> int:
        if not 1 <= count <= SLAB_SIZE:
            raise ValueError(f"a port block holds 1..{SLAB_SIZE} ports, not {count}")
        with self.lock:
            tried = 0
            while True:
                if self.current < 0 or self.cursor + count > self.slabs[self.current][0] + SLAB_SIZE:
                    self._next_slab()
                base = self.cursor
                self.cursor += count
                busy = next((p for p in range(base, base + count) if not can_listen(p, host)), None)
                if busy is None:
                    self.handed_out += count
                    return base
                self.cursor = busy + 1  # skip past the port in use
                tried += 1
                if tried > 4 * self.slab_count:
                    raise PortError(f"no {count} free consecutive ports found in {self.lo}-{self.hi}")

    def stats(self) -> str:
        return (f"{self.handed_out} port(s) handed out from {len(self.slabs)} slab(s) of {SLAB_SIZE} "
                f"in {self.lo}-{self.hi}" + (" (wrapped)" if self.wrapped else ""))


_ALLOC: Optional[_Allocator] = None
_ALLOC_LOCK = threading.Lock()


def _allocator() -> _Allocator:
    global _ALLOC
    with _ALLOC_LOCK:
        if _ALLOC is None:
            _ALLOC = _Allocator()
        return _ALLOC


def _forget_after_fork() -> None:
    # A forked child must not hand out its parent's ports: it leases slabs of its own (the
    # parent still holds the inherited locks).
    global _ALLOC, _ALLOC_LOCK
    _ALLOC = None
    _ALLOC_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def port_block(count: int, host: str = "127.0.0.1") -> int:
    """A base port such that base .. base+count-1 are reserved for this process and free now."""
    return _allocator().block(count, host)


def free_ports(n: int, host: str = "127.0.0.1") -> List[int]:
    """n distinct ports reserved for this process and free now."""
    return [port_block(1, host) for _ in range(n)]


def free_port(host: str = "127.0.0.1") -> int:
    return port_block(1, host)


def stats() -> str:
    """One line on what this process took (for the session log)."""
    return _ALLOC.stats() if _ALLOC is not None else "no port handed out"
