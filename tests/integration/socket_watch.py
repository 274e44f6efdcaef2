"""Who holds a TCP connection to a broker: a socket-level count, sampled while clients run.

    with BrokerConnectionWatch(kafka_cluster, allowed=lambda: {kp.proc.pid}, front_port=kp.port) as watch:
        ... run the clients ...
    watch.assert_only_proxies_reach_brokers()

A thread samples `ss -H -tnp state established` every `interval` seconds (ss -p names the
processes holding each socket; the tests run as root, so every process is named). Each
established connection whose peer is a port of any node of the cluster (every listener:
PLAINTEXT, INTERNAL, CONTROLLER, ...) is attributed to the processes holding its socket:

- held by a broker of the cluster (its JVM: inter-broker and quorum traffic) or by an allowed
  process (the kproxy replicas, evaluated at every sample, so a restarted kproxy counts): the
  proxy's leg, `proxied` (kproxy's own pid only);
- held by anything else: a client (or anything) that reached a broker directly, `direct`.

The connections to `front_port` (the port the clients were given) held by processes that are not
allowed are the clients' own legs, `clients`. assert_only_proxies_reach_brokers() fails when
`direct` is not empty, and also when `proxied` or `clients` is: the same samples must see the
kproxy->broker and the client->front connections, or the method saw nothing and proves nothing.

ss reads the processes' descriptors before it lists the sockets, so a connection opened in between
is listed without a process: such a connection is looked up again at once, and one closed by then
is only counted (`vanished`). A connection that opens and closes between two samples is not seen;
a client told a broker's real address keeps that connection open for its whole run (producers,
consumers and admin clients keep their broker connections), so it is.
"""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

Conn = Tuple[str, str]  # (local "host:port", peer "host:port")


def _owners(process_field: str) -> Dict[int, str]:
    """{pid: command name} from ss's `users:(("name",pid=1,fd=3),...)` field."""
    out: Dict[int, str] = {}
    for part in process_field.split("(")[1:]:
        if "pid=" not in part:
            continue
        name = part.split('"')[1] if '"' in part else "?"
        out[int(part.split("pid=", 1)[1].split(",", 1)[0].rstrip(")"))] = name
    return out


def established() -> List[Tuple[str, str, Dict[int, str]]]:
    """Every established TCP connection of this network namespace: (local, peer, {pid: name})."""
    text = subprocess.run(["ss", "-H", "-tnp", "state", "established"], capture_output=True, text=True,
                          timeout=10, check=True).stdout
    rows = []
    for line in text.splitlines():
        fields = line.split(None, 4)
        if len(fields) < 4:
            continue
        rows.append((fields[2], fields[3], _owners(fields[4] if len(fields) > 4 else "")))
    return rows


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


class BrokerConnectionWatch:
    def __init__(self, cluster, allowed: Callable[[], Iterable[int]], front_port: int, interval: float = 0.1):
        self.broker_ports: Set[int] = {p for n in cluster.nodes for p in n.ports.values()}
        self.broker_pids: Set[int] = {n.proc.pid for n in cluster.nodes if n.proc is not None}
        self.allowed = allowed
        self.front_port = front_port
        self.interval = interval
        self.direct: Dict[Conn, str] = {}     # connection -> its holders, as text
        self.proxied: Set[Conn] = set()       # held by an allowed (kproxy) process
        self.clients: Set[Conn] = set()       # to front_port, held by a process not allowed
        self.vanished: Set[Conn] = set()      # listed without a process, closed before a second look
        self.samples = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None

    def _to_broker(self, peer: str) -> bool:
        return _port(peer) in self.broker_ports and peer.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:"))

    def sample(self) -> None:
        allowed = set(self.allowed())
        rows = established()
        # ss reads the processes' descriptors before it lists the sockets: a connection opened in
        # between is listed without a process. Ask again for those; one closed meanwhile cannot be
        # attributed (`vanished`, reported, not counted either way).
        unowned = {(local, peer) for local, peer, owners in rows if not owners and self._to_broker(peer)}
        if unowned:
            again = {(local, peer): owners for local, peer, owners in established() if (local, peer) in unowned}
            rows = [(local, peer, owners or again.get((local, peer), {})) for local, peer, owners in rows
                    if owners or (local, peer) not in unowned or (local, peer) in again]
            self.vanished |= unowned - set(again)
        for local, peer, owners in rows:
            if self._to_broker(peer):
                if owners and set(owners) & allowed:
                    self.proxied.add((local, peer))
                elif owners and set(owners) <= self.broker_pids:
                    pass  # inter-broker and controller traffic
                else:
                    self.direct[(local, peer)] = ", ".join(f"{name} pid {pid}" for pid, name in owners.items()) or "no process"
            elif _port(peer) == self.front_port and owners and not set(owners) & allowed:
                self.clients.add((local, peer))
        self.samples += 1

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.sample()
                self._stop.wait(self.interval)
        except BaseException as e:  # reported by stop()
            self._error = e

    def __enter__(self) -> "BrokerConnectionWatch":
        self.sample()
        self._thread = threading.Thread(target=self._run, name="broker-connection-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(30)
            self._thread = None
        if self._error is not None:
            raise AssertionError(f"the connection watch failed: {self._error!r}")

    def __exit__(self, *exc) -> None:
        self.stop()

    def summary(self) -> Dict:
        return {"samples": self.samples, "direct": len(self.direct), "proxied": len(self.proxied), "clients": len(self.clients),
                "vanished": len(self.vanished)}

    def assert_only_proxies_reach_brokers(self) -> None:
        self.stop()
        print(f"broker connection watch: {self.summary()}")
        assert not self.direct, f"connections to broker ports held by neither kproxy nor a broker: {self.direct}"
        assert self.samples >= 2, self.summary()
        assert self.proxied, f"the watch saw no kproxy->broker connection, so it proves nothing: {self.summary()}"
        assert self.clients, f"the watch saw no client connection to port {self.front_port}: {self.summary()}"
