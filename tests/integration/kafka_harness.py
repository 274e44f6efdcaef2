"""Real Apache Kafka 4.4.0 (KRaft) brokers for kproxy's integration tests.

Python 3 standard library only. Used by the pytest fixtures in conftest.py, by
scripts/kafka (a thin CLI) and by scripts/demo.

    from kafka_harness import KafkaCluster
    with KafkaCluster(nodes=1, sasl=True) as kafka:
        kafka.bootstrap()                  # "127.0.0.1:40123"  (PLAINTEXT)
        kafka.bootstrap("SASL_PLAINTEXT")  # SASL listener (PLAIN + SCRAM-SHA-256 users)
        kafka.create_topic("orders", partitions=3)
        kafka.metadata(["orders"])         # raw Metadata v4 over a socket

Each node is one JVM running `kafka.Kafka server.properties` as a combined
broker+controller, with a static controller quorum. Every node has these listeners,
all on loopback ports from ports.py (outside the kernel's ephemeral range, reserved for this
process, so nothing else takes one while a node is down):

    CONTROLLER      KRaft quorum traffic
    INTERNAL        inter-broker traffic (always advertises its real address, so
                    replication works whatever the client-facing listeners advertise)
    PLAINTEXT       client listener
    SASL_PLAINTEXT  client listener with SASL PLAIN and SCRAM-SHA-256 (sasl=True only)
    SSL             client listener over TLS (tls=BrokerTls(...) only)
    SASL_SSL        client listener with SASL over TLS, PLAIN + SCRAM-SHA-256/512 (tls and sasl)
    <extra>         more SSL listeners with their own certificate (BrokerTls.extra_listeners)

The address a client-facing listener advertises can be set per node and listener
(`advertise=`), e.g. to make brokers advertise addresses only kproxy can reach.
`internal_advertise={node_id: (host, port)}` makes a node advertise another address for its
INTERNAL (inter-broker) listener, e.g. a kproxy port forwarding to the real one, so that
broker-to-broker requests (replica fetches, the transaction coordinator's WriteTxnMarkers) pass
through kproxy; the real port stays in `node.ports["INTERNAL"]`.

Waits (startup, a restarted node, a topic's leaders and ISRs) take their timeouts for an idle
machine and scale them by the measured machine slowness (slowness.py).

`health()` says why a cluster is not as started (a node down, a partition without leader or with
a shrunk ISR); `restore()` restarts the nodes that are down and waits until it is healthy again.

Cleanup is guaranteed as far as a process can guarantee it: context manager,
atexit, SIGTERM/SIGHUP turned into SystemExit, and every JVM is started in its own
process group with PR_SET_PDEATHSIG=SIGKILL so it dies with the Python process
even on SIGKILL (forked by one long-lived thread, since that signal follows the forking thread:
a node restarted from a pool's worker would otherwise die with the worker). Data directories are temporary and deleted; logs are kept under
build/test-logs/kafka/<run>/node-<id>/ (override with $KPROXY_TEST_LOGS).
"""

from __future__ import annotations

import atexit
import base64
import concurrent.futures
import contextlib
import ctypes
import os
import queue
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import jvm_cds
import ports
import slowness

KAFKA_VERSION = "4.4.0"
REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_HOME = Path(os.environ.get("KPROXY_KAFKA_HOME", REPO_ROOT / ".cache" / f"kafka-{KAFKA_VERSION}"))
KAFKA_LIBS = KAFKA_HOME / "libs"
LOG_ROOT = Path(os.environ.get("KPROXY_TEST_LOGS", REPO_ROOT / "build" / "test-logs")) / "kafka"
KEEP_LOG_RUNS = 20

# Users known to the SASL_PLAINTEXT listener.
PLAIN_USERS: Dict[str, str] = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_USERS: Dict[str, str] = {"scram-admin": "scram-admin-secret", "bob": "bob-secret"}
SCRAM_MECHANISM = "SCRAM-SHA-256"

CLIENT_LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
# Extra SCRAM mechanism registered for the SASL_SSL listener (tls and sasl).
SCRAM_SSL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

# Advertised address override: {node_id: {listener: (host, port)}} or
# {node_id: (host, port)} (PLAINTEXT only) or a callable
# (node_id, listener, real_host, real_port) -> (host, port) | None.
AdvertiseSpec = Union[
    None,
    Dict[int, Union[Tuple[str, int], Dict[str, Tuple[str, int]]]],
    Callable[[int, str, str, int], Optional[Tuple[str, int]]],
]


class KafkaHarnessError(RuntimeError):
    pass


@dataclass
class BrokerTls:
    """TLS for the SSL and SASL_SSL client listeners, all in PEM files: Kafka 4.x reads PEM key and
    trust stores itself (ssl.keystore.type=PEM, KIP-651), so no keytool is needed.

    keystore:   one PEM file: the broker's unencrypted PKCS#8 private key, then its certificate chain
    truststore: PEM CA certificates that client certificates must chain to
    client_auth: ssl.client.auth (none, requested, required)
    extra_listeners: more SSL listeners, name -> keystore PEM (e.g. one serving an expired certificate)
    """
    keystore: Path
    truststore: Path
    client_auth: str = "none"
    extra_listeners: Dict[str, Path] = field(default_factory=dict)


# =============================================================================================
# Minimal Kafka wire protocol (non-flexible versions only): enough to probe a broker,
# read metadata and create topics without any client library.
# =============================================================================================

API_CREATE_TOPICS = 19
API_METADATA = 3
API_VERSIONS = 18


class _Buf:
    """Big-endian reader over a response body; raises KafkaHarnessError on truncation."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise KafkaHarnessError(f"truncated Kafka response at byte {self.pos} (+{n}) of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return struct.unpack(">b", self._take(1))[0]

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def string(self) -> Optional[str]:
        n = self.int16()
        return None if n < 0 else self._take(n).decode("utf-8")

    def array(self, item: Callable[["_Buf"], object]) -> Optional[list]:
        n = self.int32()
        if n < 0:
            return None
        if n > len(self.data):
            raise KafkaHarnessError(f"implausible array length {n}")
        return [item(self) for _ in range(n)]


def _str(s: Optional[str]) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def _array(items: Optional[Sequence[bytes]]) -> bytes:
    if items is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(items)) + b"".join(items)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        out += chunk
    return bytes(out)


def kafka_request(host: str, port: int, api_key: int, api_version: int, body: bytes,
                  timeout: float = 5.0, client_id: str = "kproxy-harness") -> bytes:
    """Sends one request (header v1) and returns the response body (after header v0)."""
    corr = int.from_bytes(os.urandom(3), "big")
    header = struct.pack(">hhi", api_key, api_version, corr) + _str(client_id)
    frame = header + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        if size < 4 or size > 64 * 1024 * 1024:
            raise KafkaHarnessError(f"bad response size {size}")
        resp = _recv_exact(s, size)
    got = struct.unpack(">i", resp[:4])[0]
    if got != corr:
        raise KafkaHarnessError(f"correlation id mismatch: sent {corr}, got {got}")
    return resp[4:]


def api_versions(host: str, port: int, timeout: float = 5.0) -> Dict[int, Tuple[int, int]]:
    """ApiVersions v0 -> {api_key: (min_version, max_version)}."""
    b = _Buf(kafka_request(host, port, API_VERSIONS, 0, b"", timeout))
    err = b.int16()
    if err != 0:
        raise KafkaHarnessError(f"ApiVersions error code {err}")
    out: Dict[int, Tuple[int, int]] = {}
    for key, lo, hi in b.array(lambda r: (r.int16(), r.int16(), r.int16())) or []:
        out[key] = (lo, hi)
    return out


@dataclass
class PartitionMeta:
    partition: int
    leader: int
    replicas: List[int]
    isr: List[int]
    error_code: int = 0


@dataclass
class TopicMeta:
    name: str
    error_code: int
    internal: bool
    partitions: Dict[int, PartitionMeta] = field(default_factory=dict)


@dataclass
class ClusterMeta:
    brokers: Dict[int, Tuple[str, int]]
    cluster_id: Optional[str]
    controller_id: int
    topics: Dict[str, TopicMeta]


def metadata(host: str, port: int, topics: Optional[Iterable[str]] = (), timeout: float = 5.0) -> ClusterMeta:
    """Metadata v4. topics=() asks for brokers only, topics=None for every topic."""
    topic_list = None if topics is None else [_str(t) for t in topics]
    body = _array(topic_list) + struct.pack(">b", 0)  # allow_auto_topic_creation=false
    b = _Buf(kafka_request(host, port, API_METADATA, 4, body, timeout))
    b.int32()  # throttle_time_ms
    brokers = {}
    for node_id, h, p, _rack in b.array(lambda r: (r.int32(), r.string(), r.int32(), r.string())) or []:
        brokers[node_id] = (h, p)
    cluster_id = b.string()
    controller_id = b.int32()

    def partition(r: _Buf) -> PartitionMeta:
        err = r.int16()
        idx = r.int32()
        leader = r.int32()
        replicas = r.array(lambda x: x.int32()) or []
        isr = r.array(lambda x: x.int32()) or []
        return PartitionMeta(idx, leader, replicas, isr, err)

    def topic(r: _Buf) -> TopicMeta:
        err = r.int16()
        name = r.string() or ""
        internal = r.int8() != 0
        parts = r.array(partition) or []
        return TopicMeta(name, err, internal, {p.partition: p for p in parts})

    tmetas = b.array(topic) or []
    return ClusterMeta(brokers, cluster_id, controller_id, {t.name: t for t in tmetas})


def create_topics_raw(host: str, port: int, name: str, partitions: int = -1, replication_factor: int = -1,
                      assignments: Optional[Dict[int, List[int]]] = None,
                      configs: Optional[Dict[str, str]] = None, timeout: float = 10.0) -> Tuple[int, Optional[str]]:
    """CreateTopics v4 for one topic; returns (error_code, error_message). Must reach the
    controller-facing broker API (any broker forwards to the KRaft controller)."""
    assign = [struct.pack(">i", p) + _array([struct.pack(">i", b) for b in brokers])
              for p, brokers in sorted((assignments or {}).items())]
    cfgs = [_str(k) + _str(v) for k, v in sorted((configs or {}).items())]
    if assignments:
        partitions, replication_factor = -1, -1
    topic = _str(name) + struct.pack(">ih", partitions, replication_factor) + _array(assign) + _array(cfgs)
    body = _array([topic]) + struct.pack(">ib", int(timeout * 1000), 0)
    b = _Buf(kafka_request(host, port, API_CREATE_TOPICS, 4, body, timeout + 5))
    b.int32()  # throttle
    results = b.array(lambda r: (r.string(), r.int16(), r.string())) or []
    for tname, err, msg in results:
        if tname == name:
            return err, msg
    raise KafkaHarnessError(f"CreateTopics response did not mention {name!r}")


# =============================================================================================
# Processes and cleanup
# =============================================================================================

_LIVE: "set[KafkaCluster]" = set()
_LIVE_LOCK = threading.Lock()
_HANDLERS_INSTALLED = False


def _cleanup_all() -> None:
    with _LIVE_LOCK:
        clusters = list(_LIVE)
    for c in clusters:
        with contextlib.suppress(Exception):
            c.stop()


def _install_handlers() -> None:
    """atexit + SIGTERM/SIGHUP -> SystemExit (so `finally` blocks and fixtures run).
    SIGINT already raises KeyboardInterrupt. Only replaces default dispositions."""
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(_cleanup_all)
    if threading.current_thread() is not threading.main_thread():
        return

    def on_signal(signum, _frame):
        _cleanup_all()
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(Exception):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, on_signal)


def _child_setup() -> None:  # runs in the child between fork and exec
    os.setsid()
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class _Spawner:
    """The one thread that forks every broker JVM.

    _child_setup's PR_SET_PDEATHSIG kills a child when the *thread* that forked it exits, not when
    the process does (prctl(2)). A node forked by a short-lived thread -- a thread pool's worker
    that restarts a killed broker, as the conformance runner's broker-kill cells do -- was killed
    with SIGKILL the moment that pool shut down, with nothing in its log. Forked here instead, a
    node lives as long as the process and still dies with it (the daemon thread ends only at exit)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: "queue.Queue" = queue.Queue()
        self._thread: Optional[threading.Thread] = None

    def _loop(self) -> None:
        while True:
            args, kwargs, done = self._jobs.get()
            try:
                done.set_result(subprocess.Popen(*args, **kwargs))
            except BaseException as e:  # handed to the caller
                done.set_exception(e)

    def popen(self, *args, **kwargs) -> subprocess.Popen:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="kafka-harness-spawner", daemon=True)
                self._thread.start()
        done: "concurrent.futures.Future" = concurrent.futures.Future()
        self._jobs.put((args, kwargs, done))
        return done.result()


_SPAWNER = _Spawner()


def free_ports(n: int, host: str = "127.0.0.1") -> List[int]:
    """n distinct TCP ports on host, free now and reserved for this process (ports.py: outside the
    ephemeral range, never handed out twice, not to another test run either)."""
    return ports.free_ports(n, host)


jvm_cds.child_setup = _child_setup


def java_binary() -> str:
    jh = os.environ.get("JAVA_HOME")
    if jh and (Path(jh) / "bin" / "java").exists():
        return str(Path(jh) / "bin" / "java")
    j = shutil.which("java")
    if not j:
        raise KafkaHarnessError("java not found on PATH (run scripts/setup)")
    return j


def kafka_classpath() -> str:
    if not (KAFKA_LIBS / f"kafka_2.13-{KAFKA_VERSION}.jar").exists():
        raise KafkaHarnessError(f"Kafka {KAFKA_VERSION} jars not found in {KAFKA_LIBS} (run scripts/setup)")
    return str(KAFKA_LIBS / "*")


def random_cluster_id() -> str:
    """A Kafka Uuid string; never starting with '-' (the storage tool would read it as an option)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if cid[0].isalnum():
            return cid


def tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
        return "\n".join(data.splitlines()[-lines:])
    except OSError as e:
        return f"(cannot read {path}: {e})"


LOG4J2_PROPERTIES = """\
status = warn
name = kproxy-test-kafka
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.zk.name = org.apache.kafka.clients.NetworkClient
logger.zk.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
"""


# =============================================================================================
# Nodes and clusters
# =============================================================================================

@dataclass
class KafkaNode:
    node_id: int
    host: str
    ports: Dict[str, int]                        # listener -> real port
    advertised: Dict[str, Tuple[str, int]]       # client listener -> advertised (host, port)
    data_dir: Path
    log_dir: Path
    proc: Optional[subprocess.Popen] = None
    log_file: Optional[object] = None

    @property
    def log_path(self) -> Path:
        return self.log_dir / "kafka.log"

    @property
    def properties_path(self) -> Path:
        return self.log_dir / "server.properties"

    def address(self, listener: str = "PLAINTEXT") -> str:
        return f"{self.host}:{self.ports[listener]}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class KafkaCluster:
    """One combined broker+controller (nodes=1) or an N-node KRaft cluster (N >= 3 advised)."""

    def __init__(self, nodes: int = 1, *, sasl: bool = False, host: str = "127.0.0.1",
                 advertise: AdvertiseSpec = None, first_node_id: int = 1,
                 internal_replication_factor: Optional[int] = None,
                 extra_properties: Optional[Dict[str, str]] = None, heap: str = "512m",
                 name: str = "kafka", log_root: Optional[Path] = None, verbose: bool = False,
                 internal_advertise: Optional[Dict[int, Tuple[str, int]]] = None,
                 tls: Optional[BrokerTls] = None, plaintext_port: Optional[int] = None):
        """`plaintext_port`: the PLAINTEXT port of a one-node cluster, for a test that must name
        the broker's address before the broker exists (the other ports come from the pool)."""
        if nodes < 1:
            raise ValueError("nodes must be >= 1")
        if plaintext_port is not None and nodes != 1:
            raise ValueError("plaintext_port is for a one-node cluster")
        self.plaintext_port = plaintext_port
        self.n = nodes
        self.sasl = sasl
        self.tls = tls
        self.host = host
        self.advertise_spec = advertise
        self.internal_advertise = dict(internal_advertise or {})
        self.first_node_id = first_node_id
        self.internal_rf = internal_replication_factor or min(nodes, 3)
        self.extra_properties = dict(extra_properties or {})
        self.heap = heap
        self.name = name
        self.verbose = verbose
        self.cluster_id = random_cluster_id()
        self.nodes: List[KafkaNode] = []
        self.startup_seconds: Optional[float] = None
        self._tmp: Optional[Path] = None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.log_root = Path(log_root) if log_root else LOG_ROOT / f"{stamp}-{os.getpid()}-{name}-{uuid.uuid4().hex[:6]}"
        self._started = False

    # ---- public API ------------------------------------------------------------------------

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        """Comma-separated real addresses of every node's listener."""
        return ",".join(n.address(listener) for n in self.nodes)

    def advertised_bootstrap(self, listener: str = "PLAINTEXT") -> str:
        return ",".join(f"{h}:{p}" for h, p in (n.advertised[listener] for n in self.nodes))

    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(node_id)

    def metadata(self, topics: Optional[Iterable[str]] = (), node_id: Optional[int] = None,
                 timeout: float = 5.0) -> ClusterMeta:
        last: Optional[Exception] = None
        candidates = [self.node(node_id)] if node_id is not None else [n for n in self.nodes if n.alive()]
        for n in candidates:
            try:
                return metadata(n.host, n.ports["PLAINTEXT"], topics, timeout)
            except (OSError, KafkaHarnessError) as e:
                last = e
        raise KafkaHarnessError(f"no node answered Metadata: {last}")

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     assignments: Optional[Dict[int, List[int]]] = None,
                     configs: Optional[Dict[str, str]] = None, timeout: float = 30.0) -> TopicMeta:
        """Creates a topic and waits until every partition has a leader known to every node.
        assignments={partition: [replica broker ids, leader first]} pins placement."""
        n = next(x for x in self.nodes if x.alive())
        err, msg = create_topics_raw(n.host, n.ports["PLAINTEXT"], name, partitions, replication_factor,
                                     assignments, configs, timeout=min(timeout, 30.0))
        if err not in (0, 36):  # 36 = TOPIC_ALREADY_EXISTS
            raise KafkaHarnessError(f"CreateTopics {name}: error {err} {msg or ''}")
        want = len(assignments) if assignments else partitions
        timeout = slowness.scaled(timeout)
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            ok = True
            for node in self.nodes:
                if not node.alive():
                    continue
                try:
                    md = metadata(node.host, node.ports["PLAINTEXT"], [name], 5.0)
                except (OSError, KafkaHarnessError) as e:
                    ok, last = False, e
                    break
                t = md.topics.get(name)
                if (t is None or t.error_code != 0 or len(t.partitions) != want
                        or any(p.leader < 0 for p in t.partitions.values())):
                    ok, last = False, t
                    break
            if ok:
                return self.metadata([name]).topics[name]
            time.sleep(0.2)
        raise KafkaHarnessError(f"topic {name} not ready within {timeout:.0f}s (last: {last})")

    def start(self, timeout: Optional[float] = None) -> "KafkaCluster":
        if self._started:
            return self
        timeout = slowness.scaled(timeout if timeout is not None else 60.0 + 30.0 * self.n)
        _install_handlers()
        t0 = time.monotonic()
        for attempt in range(1, 4):
            with _LIVE_LOCK:
                _LIVE.add(self)
            self._started = True
            try:
                self._prepare()
                self._format_all()
                for n in self.nodes:
                    self._spawn(n)
                self._wait_ready(t0 + timeout)
                jvm_cds.recorded("kafka")
                break
            except KafkaHarnessError:
                # free_ports() bind-checks and reserves its ports, but a process outside the
                # tests may still bind one first: retry with fresh ports (and fresh logs).
                if attempt < 3 and self._port_clash():
                    self._log(f"{self.name}: a listener port was taken meanwhile; retrying with new ports")
                    self.stop()
                    self.nodes = []
                    self.log_root = self.log_root.with_name(f"{self.log_root.name}-retry{attempt}")
                    continue
                self._report_failure()
                self.stop()
                raise
            except BaseException:
                self._report_failure()
                self.stop()
                raise
        self.startup_seconds = time.monotonic() - t0
        self._log(f"{self.name}: {self.n} node(s) ready in {self.startup_seconds:.1f}s, "
                  f"bootstrap {self.bootstrap()}, logs {self.log_root}")
        return self

    def stop(self, graceful: bool = False) -> None:
        """Kills every node's process group, deletes the data dirs, keeps the logs."""
        for n in self.nodes:
            self._kill(n, graceful)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        with _LIVE_LOCK:
            _LIVE.discard(self)
        self._started = False

    def stop_node(self, node_id: int, graceful: bool = False) -> None:
        self._kill(self.node(node_id), graceful)

    def start_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Restarts a stopped node with its existing data dir and waits until it serves."""
        n = self.node(node_id)
        if n.alive():
            return
        self._kill(n, graceful=False)  # a node that died by itself: reap it, close its log
        self._spawn(n)
        timeout = slowness.scaled(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive(n)
            try:
                md = metadata(n.host, n.ports["PLAINTEXT"], (), 2.0)
                if n.node_id in md.brokers:
                    return
            except (OSError, KafkaHarnessError):
                pass
            time.sleep(0.25)
        raise KafkaHarnessError(f"node {node_id} did not come back within {timeout:.0f}s; log {n.log_path}")

    def kill_node(self, node_id: int) -> int:
        """`kill -9` of one node's JVM, as a crash would do it: no shutdown hook, no flush, no
        controlled leader hand-over. Ports, data dir and logs are kept, so start_node() brings the
        same node back (same listeners, log recovery from the unclean shutdown). Returns the pid."""
        n = self.node(node_id)
        if not n.alive():
            raise KafkaHarnessError(f"node {node_id} is not running")
        pid = n.proc.pid
        with contextlib.suppress(Exception):
            n.log_file.write(f"\n[kafka-harness] SIGKILL node {node_id} (pid {pid})\n".encode())
            n.log_file.flush()
        self._kill(n, graceful=False)  # SIGKILL to the process group, then reaps the JVM
        return pid

    def wait_in_sync(self, topic: str, timeout: float = 60.0) -> TopicMeta:
        """Waits until every partition of `topic` has a leader and its ISR is all of its
        replicas, as every live node reports it (e.g. after a killed node came back)."""
        timeout = slowness.scaled(timeout)
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                ok = True
                for node in self.nodes:
                    if not node.alive():
                        continue
                    t = metadata(node.host, node.ports["PLAINTEXT"], [topic], 5.0).topics.get(topic)
                    if t is None or t.error_code != 0 or not t.partitions or any(
                            p.leader < 0 or sorted(p.isr) != sorted(p.replicas) for p in t.partitions.values()):
                        ok, last = False, t
                        break
                if ok:
                    return self.metadata([topic]).topics[topic]
            except (OSError, KafkaHarnessError) as e:
                last = e
            time.sleep(0.25)
        raise KafkaHarnessError(f"topic {topic} not fully in sync within {timeout:.0f}s (last: {last})")

    def health(self, timeout: float = 5.0) -> Optional[str]:
        """None if the cluster is as started: every node running and answering, seeing every
        broker, and every partition of every topic (internal ones too) led and fully in sync
        (ISR = replicas) as each node reports it. Otherwise the first problem found."""
        if not self._started or not self.nodes:
            return "not started"
        for n in self.nodes:
            if not n.alive():
                rc = n.proc.returncode if n.proc is not None else None
                return f"node {n.node_id} is not running" + (f" (exit code {rc})" if rc is not None else "")
        want = {n.node_id for n in self.nodes}
        for n in self.nodes:
            try:
                md = metadata(n.host, n.ports["PLAINTEXT"], None, timeout)
            except (OSError, KafkaHarnessError) as e:
                return f"node {n.node_id} does not answer Metadata: {type(e).__name__}: {e}"
            if not want <= set(md.brokers):
                return f"node {n.node_id} sees brokers {sorted(md.brokers)}, not {sorted(want)}"
            bad = [f"{t.name}[{p.partition}] error {p.error_code} leader {p.leader} isr {sorted(p.isr)} "
                   f"replicas {sorted(p.replicas)}"
                   for t in md.topics.values() for p in t.partitions.values()
                   if p.error_code != 0 or p.leader < 0 or sorted(p.isr) != sorted(p.replicas)]
            if bad:
                return f"node {n.node_id} reports {len(bad)} partition(s) not in sync, e.g. {'; '.join(bad[:3])}"
        return None

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Waits until health() is None; KafkaHarnessError with the last problem otherwise."""
        timeout = slowness.scaled(timeout)
        deadline = time.monotonic() + timeout
        while True:
            reason = self.health()
            if reason is None:
                return
            dead = [n for n in self.nodes if n.proc is not None and not n.alive()]
            if dead or time.monotonic() > deadline:
                raise KafkaHarnessError(f"{self.name} not healthy within {timeout:.0f}s: {reason}")
            time.sleep(0.25)

    def restore(self, timeout: float = 120.0) -> None:
        """Brings the cluster back to health(): restarts every node that is not running (same
        ports, same data dir) and waits until every node sees every broker and every ISR is full.
        For a test that stopped or killed nodes to call in `finally`."""
        t0 = time.monotonic()
        for n in self.nodes:
            if not n.alive():
                self._log(f"{self.name}: restoring: restarting node {n.node_id}")
                self.start_node(n.node_id, timeout=timeout)
        self.wait_healthy(max(5.0, timeout - (time.monotonic() - t0) / slowness.factor()))

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- internals -------------------------------------------------------------------------

    def _log(self, msg: str) -> None:
        print(f"[kafka-harness] {msg}", file=sys.stderr, flush=True)

    def _advertised_for(self, node_id: int, listener: str, port: int) -> Tuple[str, int]:
        spec = self.advertise_spec
        got = None
        if callable(spec):
            got = spec(node_id, listener, self.host, port)
        elif isinstance(spec, dict) and node_id in spec:
            entry = spec[node_id]
            if isinstance(entry, dict):
                got = entry.get(listener)
            elif listener == "PLAINTEXT":
                got = entry
        return (got[0], int(got[1])) if got else (self.host, port)

    def _prepare(self) -> None:
        kafka_classpath()
        self.nodes = []
        _remove_stale_data_dirs()
        self._tmp = Path(tempfile.mkdtemp(prefix=f"kproxy-kafka-{os.getpid()}-"))
        self.log_root.mkdir(parents=True, exist_ok=True)
        _prune_logs()
        listeners = ["CONTROLLER", "INTERNAL", "PLAINTEXT"] + (["SASL_PLAINTEXT"] if self.sasl else [])
        listeners += self._tls_listener_names()
        if self.plaintext_port is None:
            ports = free_ports(len(listeners) * self.n, self.host)
        else:
            ports = [q for q in free_ports(len(listeners) + 1, self.host) if q != self.plaintext_port][:len(listeners)]
        for i in range(self.n):
            node_id = self.first_node_id + i
            p = {name: ports[i * len(listeners) + j] for j, name in enumerate(listeners)}
            if self.plaintext_port is not None:
                p["PLAINTEXT"] = self.plaintext_port
            adv = {name: self._advertised_for(node_id, name, p[name]) for name in listeners
                   if name in CLIENT_LISTENERS or (self.tls and name in self.tls.extra_listeners)}
            log_dir = self.log_root / f"node-{node_id}"
            log_dir.mkdir(parents=True, exist_ok=True)
            self.nodes.append(KafkaNode(node_id, self.host, p, adv, self._tmp / f"node-{node_id}", log_dir))
        voters = ",".join(f"{n.node_id}@{n.host}:{n.ports['CONTROLLER']}" for n in self.nodes)
        for n in self.nodes:
            n.properties_path.write_text(self._properties(n, voters))
            (n.log_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)

    def _properties(self, n: KafkaNode, voters: str) -> str:
        rf = str(self.internal_rf)
        listeners = [f"{name}://{n.host}:{port}" for name, port in n.ports.items()]
        internal_host, internal_port = self.internal_advertise.get(n.node_id, (n.host, n.ports["INTERNAL"]))
        advertised = [f"INTERNAL://{internal_host}:{internal_port}"] + [
            f"{name}://{h}:{p}" for name, (h, p) in n.advertised.items()]
        props: Dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(n.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map":
                "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "log.dirs": str(n.data_dir / "data"),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": "1",
            "share.coordinator.state.topic.num.partitions": "5",
            "min.insync.replicas": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.segment.bytes": str(1024 * 1024),
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
            "num.network.threads": "2",
            "num.io.threads": "4",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "4",
            "controller.quorum.election.timeout.ms": "1000",
            "controller.quorum.fetch.timeout.ms": "2000",
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "6000",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
        }
        if self.sasl:
            plain_users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
            props.update({
                "sasl.enabled.mechanisms": f"PLAIN,{SCRAM_MECHANISM}",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
                f"listener.name.sasl_plaintext.{SCRAM_MECHANISM.lower()}.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            })
        if self.tls:
            props.update(self._tls_properties(props["listener.security.protocol.map"]))
        props.update(self.extra_properties)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _java_base(self, n: KafkaNode, broker: bool = True) -> List[str]:
        # Class-data sharing (jvm_cds.py): the first broker JVM records its classes, the archive
        # made from them speeds up every later broker and storage-tool start.
        java, cp = java_binary(), kafka_classpath()
        cds = jvm_cds.options("kafka", java, cp, dump_opts=["-XX:+UseG1GC"], record=broker)
        return [java, f"-Xmx{self.heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true", *cds,
                f"-Dlog4j2.configurationFile={n.log_dir / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={n.log_dir}", "-cp", cp]

    def _format_all(self) -> None:
        """`kafka-storage format` for every node (in parallel), SCRAM users added at format time."""
        procs = []
        for n in self.nodes:
            cmd = self._java_base(n, broker=False) + ["kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                                        "-c", str(n.properties_path), "--ignore-formatted"]
            if self.sasl:
                for user, pw in SCRAM_USERS.items():
                    cmd += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={pw}]"]
                    if self.tls:
                        cmd += [arg for m in SCRAM_SSL_MECHANISMS if m != SCRAM_MECHANISM
                                for arg in ("--add-scram", f"{m}=[name={user},password={pw}]")]
            out = open(n.log_dir / "format.log", "wb")
            procs.append((n, out, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, preexec_fn=_child_setup)))
        failed = []
        for n, out, p in procs:
            try:
                rc = p.wait(timeout=slowness.scaled(60))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = "timeout"
            out.close()
            if rc != 0:
                failed.append((n, rc))
        if failed:
            details = "\n".join(f"--- node {n.node_id} format (rc={rc}), {n.log_dir / 'format.log'}:\n"
                                f"{tail(n.log_dir / 'format.log', 30)}" for n, rc in failed)
            raise KafkaHarnessError(f"storage format failed:\n{details}")

    def _spawn(self, n: KafkaNode) -> None:
        # Forked by the spawner thread, not the calling one: see _Spawner.
        cmd = self._java_base(n) + ["kafka.Kafka", str(n.properties_path)]
        n.log_file = open(n.log_path, "ab")
        n.proc = _SPAWNER.popen(cmd, stdout=n.log_file, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=_child_setup)
        (n.log_dir / "command.txt").write_text(" ".join(cmd) + "\n")

    def _kill(self, n: KafkaNode, graceful: bool) -> None:
        p = n.proc
        if p is not None:
            if p.poll() is None and graceful:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=20)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)  # the whole group, even if the leader already exited
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=15)
            n.proc = None
        if n.log_file is not None:
            with contextlib.suppress(Exception):
                n.log_file.close()
            n.log_file = None

    def _check_alive(self, n: KafkaNode) -> None:
        if n.proc is not None and n.proc.poll() is not None:
            raise KafkaHarnessError(f"node {n.node_id} exited with code {n.proc.returncode} during startup")

    def _wait_ready(self, deadline: float) -> None:
        want = {n.node_id for n in self.nodes}
        pending = list(self.nodes)
        last: Dict[int, str] = {}
        while pending:
            if time.monotonic() > deadline:
                raise KafkaHarnessError(
                    f"cluster not ready before the deadline; waiting on nodes "
                    f"{[n.node_id for n in pending]}: {last}")
            for n in list(pending):
                self._check_alive(n)
                try:
                    md = metadata(n.host, n.ports["PLAINTEXT"], (), 2.0)
                    seen = set(md.brokers)
                    if not want <= seen:
                        last[n.node_id] = f"sees brokers {sorted(seen)}"
                        continue
                    if self.sasl:
                        api_versions(n.host, n.ports["SASL_PLAINTEXT"], 2.0)
                    for name in self._tls_listener_names():
                        socket.create_connection((n.host, n.ports[name]), 2.0).close()
                    pending.remove(n)
                except (OSError, KafkaHarnessError) as e:
                    last[n.node_id] = f"{type(e).__name__}: {e}"
            if pending:
                time.sleep(0.25)

    def _tls_listener_names(self) -> List[str]:
        if not self.tls:
            return []
        return ["SSL"] + (["SASL_SSL"] if self.sasl else []) + list(self.tls.extra_listeners)

    def _tls_properties(self, protocol_map: str) -> Dict[str, str]:
        """SSL listeners on PEM stores; SASL_SSL with the SASL_PLAINTEXT users and SCRAM-SHA-512 too."""
        assert self.tls is not None
        t = self.tls
        props = {
            "listener.security.protocol.map":
                protocol_map + ",SSL:SSL,SASL_SSL:SASL_SSL" + "".join(f",{n}:SSL" for n in t.extra_listeners),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(t.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(t.truststore),
            "ssl.client.auth": t.client_auth,
        }
        for n, keystore in t.extra_listeners.items():
            props[f"listener.name.{n.lower()}.ssl.keystore.type"] = "PEM"
            props[f"listener.name.{n.lower()}.ssl.keystore.location"] = str(keystore)
        if self.sasl:
            plain_users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
            props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] = "PLAIN," + ",".join(SCRAM_SSL_MECHANISMS)
            props["listener.name.sasl_ssl.plain.sasl.jaas.config"] = \
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
            for m in SCRAM_SSL_MECHANISMS:
                props[f"listener.name.sasl_ssl.{m.lower()}.sasl.jaas.config"] = \
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return props

    def _port_clash(self) -> bool:
        return any("Address already in use" in tail(n.log_path, 200) for n in self.nodes)

    def _report_failure(self) -> None:
        self._log(f"{self.name}: startup FAILED; logs are in {self.log_root}")
        for n in self.nodes:
            self._log(f"--- node {n.node_id}: {n.log_path} (last lines) ---")
            print(tail(n.log_path, 25), file=sys.stderr, flush=True)


def _remove_stale_data_dirs() -> None:
    """Deletes data dirs left by harness processes that died without cleaning up (SIGKILL)."""
    with contextlib.suppress(OSError):
        for p in Path(tempfile.gettempdir()).glob("kproxy-kafka-*-*"):
            pid = _owner_pid(p)
            if pid is not None and not _process_alive(pid):
                shutil.rmtree(p, ignore_errors=True)


def _owner_pid(run: Path) -> Optional[int]:
    """The harness process a data or log directory belongs to: the pid in its name
    (kproxy-kafka-<pid>-..., <date>-<time>-<pid>-<name>-<id>); None for another name."""
    try:
        return int(run.name.split("-")[2])
    except (IndexError, ValueError):
        return None


def _process_alive(pid: int) -> bool:
    """Whether `pid` still runs (this process counts as running; a pid of another user too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prune_logs() -> None:
    """Keeps the newest KEEP_LOG_RUNS run directories under LOG_ROOT, and every one whose harness
    process still runs (a long conformance run beside 20 short test runs once lost its brokers'
    logs, and with them the restart of a killed node)."""
    with contextlib.suppress(OSError):
        runs = sorted((p for p in LOG_ROOT.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
        for p in runs[:-KEEP_LOG_RUNS]:
            # Never a run whose harness process still runs: its brokers write there, and a
            # restart (scenario actions, the conformance runner's broker kills) starts them there.
            pid = _owner_pid(p)
            if pid is None or not _process_alive(pid):
                shutil.rmtree(p, ignore_errors=True)


def sasl_client_config(mechanism: str = "PLAIN", user: Optional[str] = None) -> Dict[str, str]:
    """librdkafka-style settings for the SASL_PLAINTEXT listener."""
    users = PLAIN_USERS if mechanism == "PLAIN" else SCRAM_USERS
    user = user or next(iter(users))
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": users[user]}


# =============================================================================================
# CLI (scripts/kafka)
# =============================================================================================

def _describe(cluster: KafkaCluster) -> str:
    lines = [f"Kafka {KAFKA_VERSION} ready: {cluster.n} node(s) in {cluster.startup_seconds:.1f}s "
             f"(cluster id {cluster.cluster_id})",
             f"  bootstrap PLAINTEXT       {cluster.bootstrap('PLAINTEXT')}"]
    if cluster.sasl:
        lines.append(f"  bootstrap SASL_PLAINTEXT  {cluster.bootstrap('SASL_PLAINTEXT')}")
        lines.append("    PLAIN users:         " + ", ".join(f"{u}/{p}" for u, p in PLAIN_USERS.items()))
        lines.append(f"    {SCRAM_MECHANISM} users: " + ", ".join(f"{u}/{p}" for u, p in SCRAM_USERS.items()))
    for n in cluster.nodes:
        adv = ", ".join(f"{k} {h}:{p}" for k, (h, p) in n.advertised.items())
        lines.append(f"  node {n.node_id}: pid {n.proc.pid if n.proc else '-'}, advertises {adv}, "
                     f"controller {n.host}:{n.ports['CONTROLLER']}")
    lines.append(f"  logs: {cluster.log_root}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="scripts/kafka", description=f"Real Apache Kafka {KAFKA_VERSION} (KRaft) for kproxy work.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("start", help="start a broker (or cluster), print its addresses, run until Ctrl-C")
    st.add_argument("--nodes", type=int, default=1, help="number of combined broker+controller nodes (default 1)")
    st.add_argument("--sasl", action="store_true", help="add a SASL_PLAINTEXT listener (PLAIN + SCRAM-SHA-256)")
    st.add_argument("--advertise-host", help="host the client listeners advertise (default: the real address)")
    st.add_argument("--json", action="store_true", help="print one JSON line with the addresses once ready")
    st.add_argument("--timeout", type=float, default=None, help="startup timeout in seconds")
    st.add_argument("--prop", action="append", default=[], metavar="K=V", help="extra server property (repeatable)")
    pr = sub.add_parser("probe", help="ApiVersions + Metadata against HOST:PORT")
    pr.add_argument("address")
    pr.add_argument("topics", nargs="*")
    args = ap.parse_args(argv)

    if args.cmd == "probe":
        host, _, port = args.address.rpartition(":")
        versions = api_versions(host, int(port))
        md = metadata(host, int(port), args.topics or ())
        print(f"ApiVersions: {len(versions)} APIs; Metadata {versions.get(API_METADATA)}")
        print(f"cluster {md.cluster_id}, controller {md.controller_id}")
        for b, (h, p) in sorted(md.brokers.items()):
            print(f"  broker {b}: {h}:{p}")
        for t in md.topics.values():
            for p in sorted(t.partitions.values(), key=lambda x: x.partition):
                print(f"  {t.name}[{p.partition}] leader {p.leader} replicas {p.replicas} isr {p.isr}")
        return 0

    # Ctrl-C must work even when started from a script that ignores SIGINT for its children.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    extra = {}
    for kv in args.prop:
        k, sep, v = kv.partition("=")
        if not sep:
            ap.error(f"--prop wants K=V, got {kv}")
        extra[k] = v
    adv = None
    if args.advertise_host:
        adv = lambda node_id, listener, host, port: (args.advertise_host, port)  # noqa: E731
    cluster = KafkaCluster(args.nodes, sasl=args.sasl, advertise=adv, extra_properties=extra,
                           name="cli", verbose=True)
    try:
        cluster.start(args.timeout)
        if args.json:
            print(json.dumps({
                "bootstrap": cluster.bootstrap(),
                "bootstrap_sasl": cluster.bootstrap("SASL_PLAINTEXT") if args.sasl else None,
                "nodes": {n.node_id: {"ports": n.ports, "advertised": n.advertised, "pid": n.proc.pid if n.proc else None}
                          for n in cluster.nodes},
                "startup_seconds": round(cluster.startup_seconds or 0, 2),
                "logs": str(cluster.log_root),
            }), flush=True)
        else:
            print(_describe(cluster), flush=True)
            print("Press Ctrl-C to stop (data is deleted, logs are kept).", flush=True)
        while True:
            for n in cluster.nodes:
                if not n.alive():
                    print(f"node {n.node_id} exited unexpectedly; log tail:\n{tail(n.log_path)}", file=sys.stderr)
                    return 1
            time.sleep(1)
    except KeyboardInterrupt:
        print("\nstopping...", file=sys.stderr)
        return 130
    except KafkaHarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
