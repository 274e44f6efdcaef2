"""Helpers for kproxy's own integration tests (test_proxy_*.py): run the kproxy binary in front
of the harness's real brokers, and speak raw Kafka frames where a real client cannot (pipelining,
SASL v0 raw tokens, bad input). No tests live here.

    with Kproxy(kafka.bootstrap(), name="fwd") as kp:
        kp.bootstrap                   # "127.0.0.1:<port>" for clients (the kernel's pick: see below)
        kp.broker_port(1)              # kproxy port standing for broker node 1 (reported by kproxy)
        kp.log_text()                  # everything kproxy logged

`listener_yaml` adds keys to the listener (indented by 4, e.g. "    upstream_tls:\n      ca: /ca.pem\n").

The listener listens on port 0 unless `port=` is given: the kernel picks a free port and kproxy
reports it ("kproxy bound listener NAME HOST:PORT" on its standard output, issue #30 item 7), so
nothing is probed and nothing can take the port between a probe and the bind. `kp.port` is known
once start() returns; restart() keeps it. Broker ports are the kernel's too (`broker_ports: 0`):
kp.broker_port(node) is what kproxy reported for the node (waiting for the line, which comes as a
response first names the broker). `broker_ports="block"` (and `port_range=True`) reserve a block
instead (base + node id), for a test that needs a broker's port before any response names it.

The binary is $KPROXY_BIN, else build/proxy/kproxy, else the newest build-*/proxy/kproxy.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import os
import re
import signal as signals
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import kafka_harness as kh
import ports
import slowness

REPO_ROOT = kh.REPO_ROOT
LOG_ROOT = Path(os.environ.get("KPROXY_TEST_LOGS", REPO_ROOT / "build" / "test-logs")) / "kproxy"


def kproxy_binary() -> str:
    env = os.environ.get("KPROXY_BIN")
    if env:
        return env
    candidates = [REPO_ROOT / "build" / "proxy" / "kproxy"] + sorted(
        REPO_ROOT.glob("build-*/proxy/kproxy"), key=lambda p: p.stat().st_mtime, reverse=True)
    for c in candidates:
        if c.exists() and os.access(c, os.X_OK):
            return str(c)
    raise RuntimeError("kproxy binary not found: build it (cmake + ninja) or set KPROXY_BIN")


_instances = itertools.count(1)


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """A base port such that base .. base+count-1 are free now and reserved for this process
    (ports.py: outside the ephemeral range, so no outgoing connection takes one before kproxy
    opens it when a response first names the broker)."""
    return ports.port_block(count, host)


class Kproxy:
    """One kproxy process with one listener in front of `upstream`."""

    def __init__(self, upstream: str, *, name: str = "kproxy", advertise: str = "127.0.0.1", workers: int = 2,
                 max_node_id: int = 8, port_range: bool = False, drain_timeout: str = "10s", log_level: str = "debug",
                 log_format: str = "text", limits: Optional[Dict[str, str]] = None, extra_yaml: str = "",
                 all_upstreams: bool = False, listener_yaml: str = "", env: Optional[Dict[str, str]] = None,
                 binary: Optional[str] = None, port: Optional[int] = None, broker_ports: Optional[str] = None):
        # all_upstreams: give kproxy every bootstrap address ("a:1,b:2"; tried in turn when one is
        # unreachable) instead of only the first.
        self.upstream = upstream if all_upstreams else upstream.split(",")[0]
        self.env = None if env is None else {**os.environ, **env}  # extra environment of the process
        self.binary = binary  # the kproxy to run; kproxy_binary() when None
        self.name = name
        self.port = port or 0  # 0: the kernel picks at start (read back from kproxy's report)
        self.fixed_port = port is not None
        # broker_ports: "kernel" (the default; "block" with port_range) or "block" (base + node id
        # from a reserved block, for a test that needs a broker's port before any response names it).
        # "none": no broker port line at all (an SNI listener serves every broker on its one port).
        self.kernel_broker_ports = (broker_ports or ("block" if port_range else "kernel")) == "kernel"
        self.base = 0 if self.kernel_broker_ports or broker_ports == "none" else free_port_block(max_node_id + 1)
        self.port_range = port_range
        self._log_offset = 0  # where the current run's log starts (restart appends)
        limits_yaml = ""
        if limits:
            limits_yaml = "limits:\n" + "".join(f"  {k}: {v}\n" for k, v in limits.items())
        ports_yaml = (f"    broker_port_range: {self.base}-{self.base + max_node_id}\n" if port_range and not self.kernel_broker_ports
                      else f"    broker_ports: {self.base}\n")
        if broker_ports == "none":
            ports_yaml = ""
        self.config_text = (
            "listeners:\n"
            f"  - name: {name}\n"
            f"    listen: 127.0.0.1:{self.port}\n"
            f"    upstream: {self.upstream}\n"
            f"    advertise: {advertise}\n" + ports_yaml + listener_yaml +
            f"workers: {workers}\n"
            f"drain_timeout: {drain_timeout}\n"
            f"log: {{ format: {log_format}, level: {log_level} }}\n" + limits_yaml + extra_yaml)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.dir = LOG_ROOT / f"{stamp}-{os.getpid()}-{name}-{next(_instances)}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.dir / "kproxy.yaml"
        self.config_path.write_text(self.config_text)
        self.log_path = self.dir / "kproxy.log"
        self.proc: Optional[subprocess.Popen] = None
        self._log_file = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def broker_port(self, node_id: int, timeout: float = 10.0) -> int:
        if not self.kernel_broker_ports:
            return self.base + node_id
        return int(self.wait_bound("broker", f"{self.name}/node-{node_id}", timeout).rsplit(":", 1)[1])

    def bound_addresses(self) -> Dict[Tuple[str, str], str]:
        """What this run of kproxy reported binding: {(KIND, LABEL): "HOST:PORT"} from its
        "kproxy bound KIND LABEL HOST:PORT" lines, or their JSON form under JSON logs
        (proxy/util/bound_report.h)."""
        out = {}
        for line in self.log_text()[self._log_offset:].splitlines():
            if line.startswith("kproxy bound "):
                parts = line.split()
                if len(parts) == 5:
                    out[(parts[2], parts[3])] = parts[4]
            elif line.startswith('{"kproxy":"bound"'):  # under log: { format: json }
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                out[(r["kind"], r["label"])] = r["address"]
        return out

    def wait_bound(self, kind: str, label: str, timeout: float = 10.0) -> str:
        """The address kproxy reported for (kind, label), waiting up to `timeout` for the line."""
        deadline = time.monotonic() + slowness.scaled(timeout)
        while True:
            address = self.bound_addresses().get((kind, label))
            if address:
                return address
            if time.monotonic() > deadline or not self.alive():
                raise AssertionError(f"kproxy reported no bound {kind} {label}; log tail:\n{self.log_text()[-3000:]}")
            time.sleep(0.05)

    def _pin_kernel_ports(self) -> None:
        """Before a restart: the ports the kernel picked become the config's, so clients find
        kproxy where it was."""
        if self.port and not self.fixed_port:
            old = f"listen: 127.0.0.1:0\n"
            if self.config_text.count(old) == 1:
                self.config_text = self.config_text.replace(old, f"listen: 127.0.0.1:{self.port}\n")
                self.config_path.write_text(self.config_text)
            self.fixed_port = True

    def start(self, timeout: float = 10.0, append_log: bool = False) -> "Kproxy":
        timeout = slowness.scaled(timeout)
        # Every config a test starts is also given to check-config, which must agree with the
        # start (issue #15 bug 3; tests/integration/test_config_agreement.py for refused files).
        binary = self.binary or kproxy_binary()
        check = subprocess.run([binary, "check-config", str(self.config_path)], capture_output=True, text=True,
                               timeout=60, env=self.env)
        self._log_offset = self.log_path.stat().st_size if append_log and self.log_path.exists() else 0
        self._log_file = open(self.log_path, "ab" if append_log else "wb")
        self.proc = subprocess.Popen([binary, "--config", str(self.config_path)], stdout=self._log_file,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=kh._child_setup,
                                     env=self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if self.proc.returncode == 2 and check.returncode == 0:
                    raise AssertionError(f"check-config passed {self.config_path}, the start refused it:\n{self.log_text()}")
                raise RuntimeError(f"kproxy exited with {self.proc.returncode}:\n{self.log_text()}")
            if not self.fixed_port:
                # The listener's line comes once every listener is bound (and the admin API's before).
                address = self.bound_addresses().get(("listener", self.name))
                if address:
                    self.port = int(address.rsplit(":", 1)[1])
                    assert check.returncode == 0, f"{self.config_path} starts, check-config refused it:\n{check.stderr}"
                    return self
                time.sleep(0.05)
                continue
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    assert check.returncode == 0, f"{self.config_path} starts, check-config refused it:\n{check.stderr}"
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"kproxy did not listen on {self.bootstrap} within {timeout:.0f}s:\n{self.log_text()}")

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, sig: int = signals.SIGTERM, timeout: float = 30.0) -> int:
        """Signals kproxy and waits; returns its exit status (kills it after `timeout`)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(f"kproxy did not stop within {timeout}s")
        if self._log_file:
            self._log_file.close()
            self._log_file = None
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> int:
        """`kill -9` (no drain, no cleanup); returns the pid. restart() brings kproxy back on the
        same ports with the same config, appending to the same log."""
        assert self.proc is not None and self.proc.poll() is None, "kproxy is not running"
        pid = self.proc.pid
        self.proc.send_signal(signals.SIGKILL)
        self.proc.wait()
        if self._log_file:
            self._log_file.write(f"\n[test] SIGKILL kproxy pid {pid}\n".encode())
            self._log_file.close()
            self._log_file = None
        return pid

    def restart(self, timeout: float = 10.0) -> "Kproxy":
        self._pin_kernel_ports()
        return self.start(timeout, append_log=True)

    def fd_count(self) -> int:
        """Open file descriptors of the running kproxy (/proc/<pid>/fd)."""
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_kib(self) -> int:
        """VmRSS of the running kproxy, KiB (/proc/<pid>/status)."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc/<pid>/status")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_for_log(self, pattern: str, timeout: float = 10.0) -> re.Match:
        timeout = slowness.scaled(timeout)
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            m = rx.search(self.log_text())
            if m:
                return m
            time.sleep(0.05)
        raise AssertionError(f"kproxy never logged /{pattern}/ within {timeout:.0f}s; log tail:\n{self.log_text()[-3000:]}")

    def __enter__(self) -> "Kproxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        # SIGTERM, not SIGKILL: kproxy exits cleanly, so a sanitized build's LeakSanitizer checks
        # it at exit (a report fails the test: conftest.no_sanitizer_reports). A second SIGTERM
        # skips the drain; SIGKILL only if it still hangs.
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signals.SIGTERM)
            try:
                self.proc.wait(5.0)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signals.SIGTERM)
                try:
                    self.proc.wait(10.0)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        if self._log_file:
            self._log_file.close()


# ---------------------------------------------------------------------------------------------
# Raw Kafka frames
# ---------------------------------------------------------------------------------------------

def fault_rule(name: str, match: str, action: str, trigger: Optional[str] = None) -> str:
    """One rule of a config's `faults:` list (docs/faults.md "Rules"), as YAML: match and action are the insides
    of their { } maps, trigger its value ("once", "{ times: 2 }", "{ probability: 0.01, seed: 7 }");
    without a trigger the rule fires on every match."""
    text = f"  - name: {name}\n    match: {{ {match} }}\n    action: {{ {action} }}\n"
    return text + (f"    trigger: {trigger}\n" if trigger else "")


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if `proc` has not exited within `timeout` seconds; always reaped."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def request(api_key: int, version: int, correlation_id: int, body: bytes, client_id: str = "kproxy-test",
            flexible: bool = False) -> bytes:
    """A whole request frame: header v1 (v2 with an empty tagged-field section when flexible)."""
    header = struct.pack(">hhi", api_key, version, correlation_id) + kh._str(client_id)
    if flexible:
        header += b"\x00"
    return frame(header + body)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    return kh._recv_exact(sock, n)


def recv_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, size)


def connection_closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True if the peer closes the connection (EOF or reset) within `timeout`."""
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def metadata_brokers(sock: socket.socket, correlation_id: int) -> List[Tuple[int, str, int]]:
    """Metadata v4 for no topic on an open connection: [(node id, host, port)] as answered."""
    sock.sendall(request(3, 4, correlation_id, struct.pack(">i", -1) + b"\x00"))
    r = kh._Buf(recv_frame(sock))
    assert r.int32() == correlation_id
    r.int32()  # throttle_time_ms
    return [(n, h, p) for n, h, p, _rack in r.array(lambda b: (b.int32(), b.string(), b.int32(), b.string()))]


def sasl_handshake_v0(sock: socket.socket, mechanism: str, correlation_id: int = 1) -> None:
    """SaslHandshake v0, after which the SASL tokens travel as bare frames with no Kafka header
    (KIP-43); asserts the broker accepted `mechanism`."""
    sock.sendall(request(17, 0, correlation_id, kh._str(mechanism)))
    r = kh._Buf(recv_frame(sock))
    assert (r.int32(), r.int16()) == (correlation_id, 0), f"SaslHandshake v0 refused {mechanism}"


def scram_v0_exchange(sock: socket.socket, mechanism: str, user: str, password: str) -> str:
    """The client side of SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 section 3, RFC 7677) in bare
    token frames after sasl_handshake_v0; asserts the server kept the client nonce and returns
    the server-final message ("v=..." on success)."""
    algo = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    nonce = base64.b64encode(os.urandom(18)).decode()
    client_first_bare = f"n={user},r={nonce}"
    sock.sendall(frame(("n,," + client_first_bare).encode()))
    server_first = recv_frame(sock).decode()
    fields = dict(kv.split("=", 1) for kv in server_first.split(","))
    assert fields["r"].startswith(nonce), server_first
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}"
    salted = hashlib.pbkdf2_hmac(algo, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", algo).digest()
    signature = hmac.new(hashlib.new(algo, client_key).digest(), auth_message.encode(), algo).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    sock.sendall(frame(f"{without_proof},p={base64.b64encode(proof).decode()}".encode()))
    return recv_frame(sock).decode()


def compact_str(s: Optional[str]) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


class CompactBuf(kh._Buf):
    """Reads flexible-version fields too."""

    def uvarint(self) -> int:
        shift = 0
        value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def compact_string(self) -> Optional[str]:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def compact_array(self, item) -> Optional[list]:
        n = self.uvarint()
        return None if n == 0 else [item(self) for _ in range(n - 1)]

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def describe_cluster(host: str, port: int, timeout: float = 5.0) -> List[Tuple[int, str, int]]:
    """DescribeCluster v0 -> [(broker_id, host, port)] as the client sees them."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(request(60, 0, 77, b"\x00\x00", flexible=True))  # IncludeClusterAuthorizedOperations, tags
        r = CompactBuf(recv_frame(s))
    assert r.int32() == 77
    r.skip_tags()
    r.int32()  # throttle
    assert r.int16() == 0
    r.compact_string()  # error message
    r.compact_string()  # cluster id
    r.int32()  # controller id

    def broker(b: CompactBuf):
        out = (b.int32(), b.compact_string(), b.int32())
        b.compact_string()  # rack
        b.skip_tags()
        return out
    return r.compact_array(broker) or []


def find_coordinator(host: str, port: int, key: str, key_type: int = 0, timeout: float = 5.0) -> List[Tuple[int, str, int, int]]:
    """FindCoordinator v4 -> [(node_id, host, port, error_code)]."""
    body = bytes([key_type]) + uvarint(2) + compact_str(key) + b"\x00"
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(request(10, 4, 78, body, flexible=True))
        r = CompactBuf(recv_frame(s))
    assert r.int32() == 78
    r.skip_tags()
    r.int32()  # throttle

    def coordinator(b: CompactBuf):
        b.compact_string()  # key
        node, h, p, err = b.int32(), b.compact_string(), b.int32(), b.int16()
        b.compact_string()
        b.skip_tags()
        return (node, h, p, err)
    return r.compact_array(coordinator) or []
