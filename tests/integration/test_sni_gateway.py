"""One kproxy TLS port for the whole cluster (issue #33): an SNI listener in front of the real
3-node Kafka 4.4 cluster. The clients connect to `bootstrap.kafka.example.com:<port>` and are told
every broker as `broker-<id>.kafka.example.com:<port>`, the same port; kproxy reads each
ClientHello's server name before the handshake and connects the broker it names. One wildcard
certificate (`*.kafka.example.com`) serves every name.

Names resolve to 127.0.0.1 for the clients only, never for the machine (tests/integration/README.md
"Host names on loopback"): the Java clients get `-Djdk.net.hosts.file` (through JAVA_TOOL_OPTIONS),
librdkafka runs in a child process in its own mount namespace (`unshare -m`) whose /etc/hosts is a
bind-mounted file. The clients can therefore reach only names kproxy gave them, and a test checks
that every address they were told is a broker name at kproxy's one port.

The broken and unknown ClientHellos (unknown name, none, a client connecting by IP address, a hello
in 1-byte pieces, one over the cap, one never finished) each get their outcome within the configured
time, a log line naming what was received and what is configured, and their counter; an open
connection on the same port is untouched throughout.
"""

from __future__ import annotations

import json
import contextlib
import os
import re
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import clients
import kafka_harness as kh
import ports
import slowness
from haproxy_tcp import start_haproxy_tcp
from socket_watch import BrokerConnectionWatch
from test_chaos_support import ChaosKproxy
from test_proxy_support import connection_closed, recv_frame, request

DOMAIN = "kafka.example.com"
BOOTSTRAP = f"bootstrap.{DOMAIN}"
PATTERN = "broker-$(nodeId)." + DOMAIN
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def sni_pki(tmp_path_factory):
    from tls_pki import TestPki
    pki = TestPki(tmp_path_factory.mktemp("sni-pki"))
    pki.gateway = pki.issue("gateway", f"DNS:*.{DOMAIN}")
    return pki


@pytest.fixture
def hosts_file(tmp_path, kafka_cluster):
    """A hosts file naming the bootstrap and every node's broker name on 127.0.0.1 (and nothing else)."""
    names = [BOOTSTRAP] + [f"broker-{n.node_id}.{DOMAIN}" for n in kafka_cluster.nodes]
    path = tmp_path / "hosts"
    path.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {name}\n" for name in names))
    return path


def gateway(cluster, pki, *, unknown="refuse", hello_timeout="2s", max_hello="16KiB", name="gw", tls_yaml=None) -> ChaosKproxy:
    port = ports.free_port()
    tls = tls_yaml or f"    tls:\n      cert: {pki.gateway.cert}\n      key: {pki.gateway.key}\n"
    sni = (tls +
           f"    sni:\n      bootstrap: {BOOTSTRAP}\n      broker: \"{PATTERN}\"\n      unknown: {unknown}\n"
           f"      client_hello_timeout: {hello_timeout}\n      max_client_hello_bytes: {max_hello}\n")
    return ChaosKproxy(cluster.bootstrap(), name=name, port=port, broker_ports="none", advertise=BOOTSTRAP,
                       listener_yaml=sni, log_level="debug")


def java_tls(pki):
    return ["--security-protocol", "SSL", "--property", "ssl.truststore.type=PEM", "--property", f"ssl.truststore.location={pki.ca}"]


def is_broker_name(address: str, port: int, node_ids) -> bool:
    return address in {f"broker-{n}.{DOMAIN}:{port}" for n in node_ids}


def sni_counts(kp) -> dict:
    text = kp.metrics_text()
    out = {}
    for line in text.splitlines():
        if line.startswith("kproxy_proxy_sni_connections_total{"):
            label = line.split('outcome="', 1)[1].split('"', 1)[0]
            out[label] = float(line.rsplit(" ", 1)[1])
    return out


_RD_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import clients
name, kwargs = sys.argv[2], json.loads(sys.argv[3])
if name == "brokers":
    from confluent_kafka.admin import AdminClient
    md = AdminClient(kwargs["conf"]).list_topics(timeout=30)
    out = sorted(f"{b.host}:{b.port}" for b in md.brokers.values())
else:
    out = getattr(clients, name)(**kwargs)
print(json.dumps(out))
"""


def rd_in_namespace(hosts: Path, function: str, **kwargs):
    """clients.<function>(**kwargs) (librdkafka) in a child process whose /etc/hosts is `hosts`:
    a private mount namespace (unshare -m) with the file bind-mounted over /etc/hosts, so that the
    machine's other processes never see these names."""
    script = f"mount --bind {hosts} /etc/hosts && exec {sys.executable} -c \"$0\" \"$@\""
    cmd = ["unshare", "-m", "sh", "-c", script, _RD_CHILD, str(HERE), function, json.dumps(kwargs)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=slowness.scaled(240), preexec_fn=kh._child_setup)
    assert r.returncode == 0, f"{function} failed ({r.returncode}):\n{r.stderr[-4000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---- real clients --------------------------------------------------------------------------

def test_java_producer_consumer_admin_through_one_sni_port(kafka_cluster, sni_pki, hosts_file, topic_name, monkeypatch):
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    node_ids = sorted(n.node_id for n in kafka_cluster.nodes)
    with gateway(kafka_cluster, sni_pki) as kp, BrokerConnectionWatch(kafka_cluster, lambda: {kp.proc.pid}, kp.port) as watch:
        monkeypatch.setenv("JAVA_TOOL_OPTIONS", f"-Djdk.net.hosts.file={hosts_file}")
        boot = f"{BOOTSTRAP}:{kp.port}"
        prod = clients.txn_produce(boot, topic_name, 3000, 30, *java_tls(sni_pki), key_prefix="j-", abort_every=3)
        assert prod["ok"], prod
        committed = prod["records_committed"]
        assert committed == 2000 and prod["transactions_committed"] == 20, prod
        cons = clients.read_committed(boot, topic_name, committed, *java_tls(sni_pki), key_prefix="j-", group=f"g-{topic_name}")
        assert cons["ok"], cons
        assert (cons["count"], cons["unique_keys"], cons["duplicates"], cons["content_mismatches"]) == (committed, committed, 0, 0)
        view = clients.run_java("ClusterView", ["--bootstrap", boot, "--topic", topic_name, "--create-topic", topic_name + "-new",
                                                *java_tls(sni_pki)])
        assert view["ok"], view
        # Every address the admin client was told: a broker name at kproxy's one port.
        assert sorted(view["nodes"]) == sorted(f"broker-{n}.{DOMAIN}:{kp.port}" for n in node_ids)
        assert is_broker_name(view["controller"], kp.port, node_ids), view
        assert view["leaders"] and all(is_broker_name(a, kp.port, node_ids) for a in view["leaders"]), view
        assert view["created"] is True
        watch.assert_only_proxies_reach_brokers()  # counted on the sockets, not inferred
        log = kp.log_text()
        leaders = {int(a.split(".", 1)[0].split("-", 1)[1]) for a in view["leaders"]}
        for node in leaders:
            real = next(n for n in kafka_cluster.nodes if n.node_id == node)
            assert f"SNI 'broker-{node}.{DOMAIN}': broker node {node} at 127.0.0.1:{real.ports['PLAINTEXT']}" in log, node
        assert f"SNI '{BOOTSTRAP}': bootstrap at" in log
        counts = sni_counts(kp)
        assert counts["broker"] >= len(leaders) and counts["bootstrap"] >= 1, counts
        assert all(counts[k] == 0 for k in counts if k not in ("broker", "bootstrap")), counts
        assert "failed" not in log.replace("failed_", ""), log[-3000:]
        assert kp.stop() == 0


def test_librdkafka_through_one_sni_port_with_transactions(kafka_cluster, sni_pki, hosts_file, topic_name):
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    node_ids = sorted(n.node_id for n in kafka_cluster.nodes)
    with gateway(kafka_cluster, sni_pki) as kp, BrokerConnectionWatch(kafka_cluster, lambda: {kp.proc.pid}, kp.port) as watch:
        boot = f"{BOOTSTRAP}:{kp.port}"
        conf = {"security.protocol": "SSL", "ssl.ca.location": str(sni_pki.ca)}
        brokers = rd_in_namespace(hosts_file, "brokers", conf={"bootstrap.servers": boot, **conf})
        assert brokers == sorted(f"broker-{n}.{DOMAIN}:{kp.port}" for n in node_ids)
        prod = rd_in_namespace(hosts_file, "rd_produce", bootstrap=boot, topic=topic_name, count=600, key_prefix="rd-", conf=conf)
        assert prod["errors"] == [] and prod["delivered"] == 600, prod
        txn = rd_in_namespace(hosts_file, "rd_txn_produce", bootstrap=boot, topic=topic_name, records=600, transactions=6,
                              key_prefix="rdtx-", abort_every=3, conf=conf)
        assert txn["errors"] == [], txn
        assert (txn["records_committed"], txn["transactions_committed"]) == (400, 4), txn
        cons = rd_in_namespace(hosts_file, "rd_consume", bootstrap=boot, topic=topic_name, expect=400, key_prefix="rdtx-",
                               isolation="read_committed", conf=conf)
        assert (cons["count"], cons["unique_keys"], cons["duplicates"], cons["content_mismatches"]) == (400, 400, 0, 0), cons
        plain = rd_in_namespace(hosts_file, "rd_consume", bootstrap=boot, topic=topic_name, expect=600, key_prefix="rd-", conf=conf)
        assert (plain["count"], plain["duplicates"]) == (600, 0), plain
        watch.assert_only_proxies_reach_brokers()
        counts = sni_counts(kp)
        assert counts["broker"] >= 3 and counts["bootstrap"] >= 1, counts
        assert all(counts[k] == 0 for k in counts if k not in ("broker", "bootstrap")), counts
        assert kp.stop() == 0


def test_franz_go_through_one_sni_port_with_transactions(kafka_cluster, sni_pki, hosts_file, topic_name):
    """franz-go (tests/integration/franzgo, the version conformance/drivers/franz-go pins), run like
    librdkafka in its own mount namespace: Go's resolver reads /etc/hosts (the bind-mounted file)."""
    build = subprocess.run([str(HERE / "franzgo" / "build")], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    binary = HERE.parent.parent / ".cache" / "franzgo-sni" / "franzgo-sni"
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    node_ids = sorted(n.node_id for n in kafka_cluster.nodes)
    with gateway(kafka_cluster, sni_pki) as kp, BrokerConnectionWatch(kafka_cluster, lambda: {kp.proc.pid}, kp.port) as watch:
        args = [str(binary), "-bootstrap", f"{BOOTSTRAP}:{kp.port}", "-ca", str(sni_pki.ca), "-topic", topic_name,
                "-txns", "6", "-per", "100", "-abort-every", "3", "-txid", f"fg-{topic_name}",
                "-timeout", f"{int(slowness.scaled(120))}s"]
        script = f"mount --bind {hosts_file} /etc/hosts && exec \"$0\" \"$@\""
        r = subprocess.run(["unshare", "-m", "sh", "-c", script, *args], capture_output=True, text=True,
                           timeout=slowness.scaled(240), preexec_fn=kh._child_setup)
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["errors"] == [], out
        assert out["brokers"] == sorted(f"broker-{n}.{DOMAIN}:{kp.port}" for n in node_ids), out
        assert (out["records_committed"], out["records_aborted"]) == (400, 200), out
        assert (out["consumed"], out["unique_keys"], out["duplicates"], out["aborted_seen"]) == (400, 400, 0, 0), out
        watch.assert_only_proxies_reach_brokers()
        counts = sni_counts(kp)
        assert counts["broker"] >= 3 and counts["bootstrap"] >= 1, counts
        assert all(counts[k] == 0 for k in counts if k not in ("broker", "bootstrap")), counts
        assert kp.stop() == 0


def test_the_connection_watch_sees_a_direct_connection_and_the_proxied_ones(kafka_cluster, sni_pki):
    """socket_watch.py proven on both sides: a TLS client through kproxy counts as a client leg and
    kproxy's upstream as proxied; a socket of this process to a broker's own port is direct, and
    fails the check."""
    with gateway(kafka_cluster, sni_pki, name="gw-watch") as kp, \
            BrokerConnectionWatch(kafka_cluster, lambda: {kp.proc.pid}, kp.port) as watch:
        with _served(kp, sni_pki):
            deadline = time.monotonic() + slowness.scaled(10)
            while not (watch.proxied and watch.clients):
                assert time.monotonic() < deadline, watch.summary()
                time.sleep(0.05)
        node = kafka_cluster.nodes[-1]
        with socket.create_connection(("127.0.0.1", node.ports["PLAINTEXT"]), timeout=10) as direct:
            here = "%s:%d" % direct.getsockname()
            while not any(local == here for local, _peer in watch.direct):
                assert time.monotonic() < deadline + slowness.scaled(10), watch.summary()
                time.sleep(0.05)
        assert any(f"pid {os.getpid()}" in holders for holders in watch.direct.values()), watch.direct
        with pytest.raises(AssertionError, match="held by neither kproxy nor a broker"):
            watch.assert_only_proxies_reach_brokers()
        assert kp.stop() == 0


# ---- what is not a known name ------------------------------------------------------------------

def _tls_context(pki) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    return ctx


def _api_versions(sock, cid=7) -> int:
    sock.sendall(request(18, 0, cid, b""))
    r = kh._Buf(recv_frame(sock))
    assert r.int32() == cid
    return r.int16()


def _served(kp, pki, name=BOOTSTRAP):
    """A TLS connection with SNI `name`, whose ApiVersions is answered."""
    raw = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
    s = _tls_context(pki).wrap_socket(raw, server_hostname=name)
    assert _api_versions(s) == 0
    return s


def _hello_bytes(pki, name):
    """The ClientHello a Python TLS client sends for `name` (None: no SNI), and its SSLObject to go on with."""
    ctx = _tls_context(pki)
    if name is None:
        ctx.check_hostname = False
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read(), obj, incoming, outgoing


def _finish_handshake(sock, obj, incoming, outgoing):
    sock.settimeout(10)
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            if outgoing.pending:
                sock.sendall(outgoing.read())
            data = sock.recv(65536)
            assert data, "kproxy closed during the handshake"
            incoming.write(data)
    if outgoing.pending:
        sock.sendall(outgoing.read())


def _wait_count(kp, outcome, want, timeout=10.0):
    deadline = time.monotonic() + slowness.scaled(timeout)
    while time.monotonic() < deadline:
        if sni_counts(kp).get(outcome, 0) >= want:
            return
        time.sleep(0.05)
    raise AssertionError(f"{outcome} stayed below {want}: {sni_counts(kp)}")


def test_unknown_missing_and_broken_client_hellos_get_their_outcome(kafka_cluster, sni_pki):
    with gateway(kafka_cluster, sni_pki, hello_timeout="2s", max_hello="4KiB") as kp:
        keeper = _served(kp, sni_pki)  # open through every case below
        configured = f"configured: bootstrap '{BOOTSTRAP}', brokers '{PATTERN}'"
        c0 = sni_counts(kp)

        # An unknown name: the TLS alert unrecognized_name, at once.
        t0 = time.monotonic()
        with pytest.raises(ssl.SSLError, match="UNRECOGNIZED_NAME"):
            _served(kp, sni_pki, "kafka.example.org")
        assert time.monotonic() - t0 < slowness.scaled(5)
        _wait_count(kp, "unknown_name_refused", c0["unknown_name_refused"] + 1)
        kp.wait_for_log(r"SNI 'kafka\.example\.org' matches no configured name: refused \(sni\.unknown: refuse\); " +
                        re.escape(configured) + r" \[unknown_name_refused\]")

        # No SNI at all, and a client connecting by IP address (Python, like every client, sends none for it).
        for server_hostname in (None, "127.0.0.1"):
            time.sleep(1.1)  # one line per second per outcome: each case gets its own
            ctx = _tls_context(sni_pki)
            ctx.check_hostname = False
            raw = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
            with pytest.raises(ssl.SSLError, match="UNRECOGNIZED_NAME"):
                ctx.wrap_socket(raw, server_hostname=server_hostname)
            raw.close()
        _wait_count(kp, "no_name_refused", c0["no_name_refused"] + 2)
        kp.wait_for_log(r"SNI no server name is no host name \(a client connecting by IP address sends none, RFC 6066\): refused")

        # A real hello in 1-byte pieces: read whole, served as the name says.
        hello, obj, incoming, outgoing = _hello_bytes(sni_pki, BOOTSTRAP)
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as raw:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(len(hello)):
                raw.sendall(hello[i:i + 1])
                time.sleep(0.002)
            _finish_handshake(raw, obj, incoming, outgoing)
            obj.write(request(18, 0, 9, b""))
            raw.sendall(outgoing.read())
            reply = b""
            while True:
                try:
                    got = obj.read(65536)
                    reply += got
                    if len(reply) >= 10:
                        break
                except ssl.SSLWantReadError:
                    data = raw.recv(65536)
                    assert data, "closed"
                    incoming.write(data)
            assert int.from_bytes(reply[4:8], "big") == 9 and int.from_bytes(reply[8:10], "big") == 0
        assert sni_counts(kp)["bootstrap"] >= c0["bootstrap"] + 1

        # Over the cap (4 KiB): a handshake record announcing 16 KiB, sent in full: closed, counted.
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as raw:
            body = bytes([1, 0, 0x3f, 0xfc]) + b"\x03\x03" + bytes(16380 - 2)
            raw.sendall(bytes([22, 3, 1, 0x40, 0x00]) + body)
            assert connection_closed(raw, 10)
        _wait_count(kp, "too_large", c0["too_large"] + 1)
        kp.wait_for_log(r"SNI: ClientHello cannot be read: no whole ClientHello within the first 4096 bytes; " + re.escape(configured) +
                        r" \[too_large\]")

        # A hello that never ends: closed at client_hello_timeout (2 s), counted.
        with socket.create_connection(("127.0.0.1", kp.port), timeout=15) as raw:
            raw.sendall(hello[:10])
            t0 = time.monotonic()
            assert connection_closed(raw, 15)
            took = time.monotonic() - t0
        assert 1.5 <= took <= slowness.scaled(6), took
        _wait_count(kp, "timeout", c0["timeout"] + 1)
        kp.wait_for_log(r"SNI: ClientHello not whole within 2000 ms \(sni\.client_hello_timeout\); " + re.escape(configured) +
                        r" \[timeout\]")

        # Not TLS at all (a plaintext Kafka client on the TLS port).
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as raw:
            raw.sendall(request(18, 0, 1, b""))
            assert connection_closed(raw, 10)
        _wait_count(kp, "not_tls", c0["not_tls"] + 1)
        kp.wait_for_log(r"SNI: ClientHello cannot be read: .*\[not_tls\]")

        # The connection opened first was never touched.
        assert _api_versions(keeper, 11) == 0
        keeper.close()
        assert kp.stop() == 0


def test_unknown_names_served_as_bootstrap_when_configured(kafka_cluster, sni_pki):
    with gateway(kafka_cluster, sni_pki, unknown="bootstrap", name="gw-lenient") as kp:
        c0 = sni_counts(kp)
        ctx = _tls_context(sni_pki)
        ctx.check_hostname = False  # the certificate names *.kafka.example.com, not these
        for server_hostname, outcome in (("other.example.org", "unknown_name_bootstrap"), (None, "no_name_bootstrap")):
            raw = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
            with ctx.wrap_socket(raw, server_hostname=server_hostname) as s:
                assert _api_versions(s) == 0
            _wait_count(kp, outcome, c0[outcome] + 1)
        kp.wait_for_log(r"SNI 'other\.example\.org' matches no configured name: served as the bootstrap \(sni\.unknown: bootstrap\)")
        # A broker name whose node no response named: kproxy asks the bootstrap for the brokers
        # first; a node the cluster does not have goes to the bootstrap too, and says so.
        raw = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
        with _tls_context(sni_pki).wrap_socket(raw, server_hostname=f"broker-77.{DOMAIN}") as s:
            assert _api_versions(s) == 0
        _wait_count(kp, "unknown_node", c0["unknown_node"] + 1)
        kp.wait_for_log(r"learnt brokers 1 at .*, 2 at .*, 3 at .* from the bootstrap")
        kp.wait_for_log(r"names broker node 77, which neither a response nor the bootstrap's broker list named: "
                        r"served as the bootstrap")
        assert kp.metric("kproxy_proxy_broker_discoveries_total") == 1
        assert kp.stop() == 0


def test_a_reload_gives_new_connections_the_renewed_certificate(kafka_cluster, sni_pki, tmp_path):
    """SIGHUP reads the certificate files again: a new connection gets the new certificate, one
    opened before keeps working with its own."""
    cert, key = tmp_path / "gw.pem", tmp_path / "gw.key"
    first = sni_pki.issue("gateway-1", f"DNS:*.{DOMAIN}")
    cert.write_bytes(first.cert.read_bytes())
    key.write_bytes(first.key.read_bytes())

    class Pki:
        ca = sni_pki.ca
        gateway = type("G", (), {"cert": cert, "key": key})

    with gateway(kafka_cluster, Pki, name="gw-reload") as kp:
        old = _served(kp, sni_pki)
        before = old.getpeercert(binary_form=True)
        second = sni_pki.issue("gateway-2", f"DNS:*.{DOMAIN}")
        cert.write_bytes(second.cert.read_bytes())
        key.write_bytes(second.key.read_bytes())
        kp.signal(1)  # SIGHUP
        kp.wait_for_log(r"config reloaded from")
        deadline = time.monotonic() + slowness.scaled(10)
        while True:
            new = _served(kp, sni_pki)
            after = new.getpeercert(binary_form=True)
            new.close()
            if after != before or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert after != before
        assert _api_versions(old, 12) == 0  # the old connection keeps its session
        old.close()
        assert kp.stop() == 0



def test_a_certificate_per_name_chosen_by_sni(kafka_cluster, sni_pki, hosts_file, topic_name):
    """tls.cert for the bootstrap name, tls.certificates one per broker name: each client gets the
    certificate of the name it asked for, and librdkafka (verifying host names) goes through."""
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    boot_id = sni_pki.issue("sni-bootstrap", f"DNS:{BOOTSTRAP}")
    tls = f"    tls:\n      cert: {boot_id.cert}\n      key: {boot_id.key}\n      certificates:\n"
    for n in kafka_cluster.nodes:
        ident = sni_pki.issue(f"sni-broker-{n.node_id}", f"DNS:broker-{n.node_id}.{DOMAIN}")
        tls += f"        - {{cert: {ident.cert}, key: {ident.key}}}\n"
    with gateway(kafka_cluster, sni_pki, name="gw-per-name", tls_yaml=tls) as kp:
        for name in [BOOTSTRAP] + [f"broker-{n.node_id}.{DOMAIN}" for n in kafka_cluster.nodes]:
            with _served(kp, sni_pki, name) as s:  # the default context checks the host name
                sans = [v for k, v in s.getpeercert()["subjectAltName"] if k == "DNS"]
                assert sans == [name], (name, sans)
        boot = f"{BOOTSTRAP}:{kp.port}"
        conf = {"security.protocol": "SSL", "ssl.ca.location": str(sni_pki.ca), "ssl.endpoint.identification.algorithm": "https"}
        with BrokerConnectionWatch(kafka_cluster, lambda: {kp.proc.pid}, kp.port) as watch:
            prod = rd_in_namespace(hosts_file, "rd_produce", bootstrap=boot, topic=topic_name, count=300, key_prefix="pn-", conf=conf)
            assert prod["errors"] == [] and prod["delivered"] == 300, prod
            cons = rd_in_namespace(hosts_file, "rd_consume", bootstrap=boot, topic=topic_name, expect=300, key_prefix="pn-", conf=conf)
            assert (cons["count"], cons["duplicates"]) == (300, 0), cons
        watch.assert_only_proxies_reach_brokers()
        assert f"for the names it is valid for {sni_pki.dir}" in kp.log_text()
        assert kp.stop() == 0


# ---- TLS ended at a load balancer: the PROXY header's authority routes -------------------------

def _haproxy_tls(tmp_path, pki, front, kproxy_port):
    """HAProxy ending TLS on `front` (the wildcard certificate) and sending PROXY v2 with the
    authority TLV (the SNI its client sent) to kproxy."""
    pem = tmp_path / "haproxy.pem"
    pem.write_bytes(pki.gateway.cert.read_bytes() + pki.gateway.key.read_bytes())
    return start_haproxy_tcp(tmp_path / "haproxy.cfg", front, bind_options=f"ssl crt {pem}",
                             backend=f"  server kproxy 127.0.0.1:{kproxy_port} send-proxy-v2 proxy-v2-options authority\n")


def test_the_proxy_authority_routes_when_tls_ends_at_haproxy(kafka_cluster, sni_pki, hosts_file, topic_name, tmp_path):
    """A `proxy_protocol: v2` SNI listener without `tls:` behind HAProxy, which ends TLS and sends
    the client's SNI as the authority TLV (PP2_TYPE_AUTHORITY): librdkafka bootstraps and reaches
    every broker through HAProxy's one port, which is the port advertised (not kproxy's)."""
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    front = ports.free_port()
    listener = (f"    proxy_protocol: v2\n    sni:\n      bootstrap: {BOOTSTRAP}\n      broker: \"{PATTERN}\"\n"
                f"      advertised_port: {front}\n")
    kp = ChaosKproxy(kafka_cluster.bootstrap(), name="gw-authority", port=ports.free_port(), broker_ports="none",
                     advertise=BOOTSTRAP, listener_yaml=listener, log_level="debug")
    with kp:
        haproxy = _haproxy_tls(tmp_path, sni_pki, front, kp.port)
        try:
            c0 = sni_counts(kp)
            boot = f"{BOOTSTRAP}:{front}"
            conf = {"security.protocol": "SSL", "ssl.ca.location": str(sni_pki.ca)}
            with BrokerConnectionWatch(kafka_cluster, lambda: {kp.proc.pid, haproxy.pid}, front) as watch:
                brokers = rd_in_namespace(hosts_file, "brokers", conf={"bootstrap.servers": boot, **conf})
                assert brokers == sorted(f"broker-{n.node_id}.{DOMAIN}:{front}" for n in kafka_cluster.nodes)
                prod = rd_in_namespace(hosts_file, "rd_produce", bootstrap=boot, topic=topic_name, count=300, key_prefix="pa-", conf=conf)
                assert prod["errors"] == [] and prod["delivered"] == 300, prod
                cons = rd_in_namespace(hosts_file, "rd_consume", bootstrap=boot, topic=topic_name, expect=300, key_prefix="pa-", conf=conf)
                assert (cons["count"], cons["duplicates"]) == (300, 0), cons
            watch.assert_only_proxies_reach_brokers()
            log = kp.log_text()
            assert f"PROXY authority '{BOOTSTRAP}': bootstrap at" in log
            for n in kafka_cluster.nodes:
                if f"PROXY authority 'broker-{n.node_id}.{DOMAIN}': broker node {n.node_id}" in log:
                    break
            else:
                raise AssertionError(log[-3000:])
            counts = sni_counts(kp)
            assert counts["broker"] > c0["broker"] and counts["bootstrap"] > c0["bootstrap"], counts
            # An unknown name through HAProxy: refused by kproxy (closed: the TLS is HAProxy's), counted.
            ctx = _tls_context(sni_pki)
            ctx.check_hostname = False
            with ctx.wrap_socket(socket.create_connection(("127.0.0.1", front), timeout=10), server_hostname="nope.example.org") as s:
                s.sendall(request(18, 0, 3, b""))
                try:
                    assert connection_closed(s, 10)
                except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
                    pass  # HAProxy ended its TLS when kproxy closed: closed all the same
            _wait_count(kp, "unknown_name_refused", c0["unknown_name_refused"] + 1)
            kp.wait_for_log(r"PROXY authority 'nope\.example\.org' matches no configured name: refused")
        finally:
            haproxy.terminate()
            haproxy.wait(10)
        assert kp.stop() == 0


def _haproxy_passthrough(tmp_path, front, kproxy_ports) -> subprocess.Popen:
    """HAProxy in TCP mode (TLS passes through) on `front`, round robin over kproxies on
    `kproxy_ports` (servers kproxy0, kproxy1, ... of backend be), each sent PROXY v2 first. A
    kproxy that refuses the connection (its listener closed: draining, or not yet restarted) costs
    a retry, and every retry may go to the other server (`option redispatch 1`), so no client
    connection fails for it."""
    servers = "".join(f"  server kproxy{i} 127.0.0.1:{port} send-proxy-v2\n" for i, port in enumerate(kproxy_ports))
    return start_haproxy_tcp(tmp_path / "haproxy-tcp.cfg", front, backend="  balance roundrobin\n" + servers,
                             defaults="  retries 3\n  option redispatch 1\n")


def _proxy_v2_header(sock: socket.socket) -> bytes:
    """A PROXY protocol v2 header (TCP over IPv4) naming `sock`'s own addresses."""
    (src, sport), (dst, dport) = sock.getsockname(), sock.getpeername()
    addresses = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack(">HH", sport, dport)
    return b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + struct.pack(">H", len(addresses)) + addresses


def _tls_through_proxy_header(kp, pki, name) -> ssl.SSLSocket:
    """A TLS connection with SNI `name` straight to `kp` (a `proxy_protocol: v2` listener)."""
    raw = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
    raw.sendall(_proxy_v2_header(raw))
    return _tls_context(pki).wrap_socket(raw, server_hostname=name)


def _metadata_brokers(sock) -> dict:
    """Metadata v4 (brokers only) on `sock`: {node id: (host, port)}."""
    sock.sendall(request(3, 4, 21, kh._array([]) + b"\x00"))
    r = kh._Buf(recv_frame(sock))
    assert r.int32() == 21
    r.int32()  # throttle_time_ms
    return {n: (h, p) for n, h, p, _rack in r.array(lambda x: (x.int32(), x.string(), x.int32(), x.string()))}


def _compact(text) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def _api_versions_v5_error(sock, cluster_id: str, node_id: int) -> int:
    """ApiVersions v5 naming the cluster and node the client means to reach (KIP-1242, what the
    Kafka 4.4 Java client sends once it knows them): the response's error code (129,
    REBOOTSTRAP_REQUIRED, when the broker that answers is not that node)."""
    body = _compact("apache-kafka-java") + _compact("4.4.0") + _compact(cluster_id) + struct.pack(">i", node_id) + b"\x00"
    sock.sendall(request(18, 5, 31, body, flexible=True))
    r = kh._Buf(recv_frame(sock))  # response header v0 for ApiVersions
    assert r.int32() == 31
    return r.int16()


def test_sni_after_a_proxy_header_when_tls_passes_through_haproxy(kafka_cluster, sni_pki, hosts_file, topic_name, tmp_path):
    """HAProxy in TCP mode (TLS passes through) sends PROXY v2 first: kproxy reads the header, then
    the ClientHello after it, and routes by its SNI; the broker port advertised is HAProxy's."""
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    front = ports.free_port()
    listener = (f"    proxy_protocol: v2\n    tls:\n      cert: {sni_pki.gateway.cert}\n      key: {sni_pki.gateway.key}\n"
                f"    sni:\n      bootstrap: {BOOTSTRAP}\n      broker: \"{PATTERN}\"\n      advertised_port: {front}\n")
    kp = ChaosKproxy(kafka_cluster.bootstrap(), name="gw-pp-tls", port=ports.free_port(), broker_ports="none",
                     advertise=BOOTSTRAP, listener_yaml=listener, log_level="debug")
    with kp:
        haproxy = _haproxy_passthrough(tmp_path, front, [kp.port])
        try:
            boot = f"{BOOTSTRAP}:{front}"
            conf = {"security.protocol": "SSL", "ssl.ca.location": str(sni_pki.ca)}
            with BrokerConnectionWatch(kafka_cluster, lambda: {kp.proc.pid, haproxy.pid}, front) as watch:
                prod = rd_in_namespace(hosts_file, "rd_produce", bootstrap=boot, topic=topic_name, count=300, key_prefix="pt-", conf=conf)
                assert prod["errors"] == [] and prod["delivered"] == 300, prod
                cons = rd_in_namespace(hosts_file, "rd_consume", bootstrap=boot, topic=topic_name, expect=300, key_prefix="pt-", conf=conf)
                assert (cons["count"], cons["duplicates"]) == (300, 0), cons
            watch.assert_only_proxies_reach_brokers()
            log = kp.log_text()
            assert "(PROXY protocol v2)" in log
            assert f"SNI '{BOOTSTRAP}': bootstrap at" in log
            assert re.search(rf"SNI 'broker-\d+\.{re.escape(DOMAIN)}': broker node \d+ at", log), log[-3000:]
        finally:
            haproxy.terminate()
            haproxy.wait(10)
        assert kp.stop() == 0


# ---- two replicas behind one load-balancer port: one drained and restarted, then the other ---------

# Client log lines (WARN and above, tests/integration/java/log4j2-clients.properties) that name a
# retriable condition the client handles itself: a connection lost or refused, or a retriable
# error code (the Kafka protocol's RetriableException subclasses; CONCURRENT_TRANSACTIONS comes
# when a transaction begins while the markers of the one before are still being written).
_RETRIABLE_ERRORS = ("CONCURRENT_TRANSACTIONS", "NETWORK_EXCEPTION", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
                     "COORDINATOR_LOAD_IN_PROGRESS", "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "UNKNOWN_TOPIC_OR_PARTITION")
_RETRIABLE_CLIENT_LINES = re.compile(
    r"^Picked up JAVA_TOOL_OPTIONS|Error: (" + "|".join(_RETRIABLE_ERRORS) + r")\b|Disconnected from node|"
    r"Connection to node -?\d+ .* could not be established|Cancelled in-flight \w+ request .* due to node -?\d+ being disconnected")


def _unexpected_client_lines(stderr: str) -> list:
    """The client's log lines (WARN, ERROR) that are not a retriable condition. A Produce retried
    for OUT_OF_ORDER_SEQUENCE_NUMBER counts as retriable only after a retriable error on the same
    partition: the batch behind a failed one reaches the broker with a sequence gap, and the client
    resends both (the Java producer's Sender says "retrying")."""
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith((" ", "\t", "at ", "Caused by"))]
    unexpected, failed_partitions = [], set()
    for ln in lines:
        partition = re.search(r"on topic-partition (\S+?),", ln)
        if _RETRIABLE_CLIENT_LINES.search(ln):
            if partition:
                failed_partitions.add(partition.group(1))
        elif ("Error: OUT_OF_ORDER_SEQUENCE_NUMBER" in ln and "retrying" in ln and partition
              and partition.group(1) in failed_partitions):
            pass
        else:
            unexpected.append(ln)
    return unexpected


def _served_counts(kp) -> float:
    c = sni_counts(kp)
    return c.get("broker", 0) + c.get("bootstrap", 0)


def _drain(kp, drain_timeout: float) -> float:
    """SIGTERM (kproxy drains: docs/architecture.md "Shutdown and reload"): waits for the exit,
    which must be clean (status 0, no connection left for the drain deadline). Returns the seconds."""
    offset = len(kp.log_text())
    t0 = time.monotonic()
    rc = kp.stop(signal.SIGTERM, timeout=drain_timeout + slowness.scaled(15))
    took = time.monotonic() - t0
    log = kp.log_text()[offset:]
    assert rc == 0, log[-3000:]
    assert "draining: no new connections" in log, log[-3000:]
    assert "drain deadline passed" not in log, log[-3000:]
    return took


def test_two_replicas_behind_one_haproxy_port_drained_and_restarted_under_transactions(
        kafka_cluster, sni_pki, hosts_file, topic_name, tmp_path, monkeypatch):
    """Two kproxy SNI replicas behind HAProxy's one port (TCP mode, TLS passes through, round
    robin, PROXY v2), both advertising that port. A Java transactional producer (3,000 records in
    60 transactions, every 3rd aborted) and a read_committed consumer group run through it while
    replica A is drained by SIGTERM and restarted on its port, then replica B the same way: every
    connection of the drained replica moves to the other through HAProxy. Exact records read
    committed, no client error but retriable ones, each restarted replica serves again, and no
    client connection reaches a broker directly (socket_watch.py).

    HAProxy sends a replica clients as soon as it is up: a replica that did not carry a client's
    Metadata asks the bootstrap for the brokers itself before it routes a broker name
    (proxy/runtime/broker_discovery.h; test_a_fresh_replica_serves_a_broker_name_at_the_named_broker),
    so no client is misrouted (Kafka 4.4 clients would rebootstrap, KIP-1242)."""
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    front = ports.free_port()
    drain_timeout = 15
    listener = (f"    proxy_protocol: v2\n    tls:\n      cert: {sni_pki.gateway.cert}\n      key: {sni_pki.gateway.key}\n"
                f"    sni:\n      bootstrap: {BOOTSTRAP}\n      broker: \"{PATTERN}\"\n      advertised_port: {front}\n")
    replicas = [ChaosKproxy(kafka_cluster.bootstrap(), name=f"gw-replica-{x}", port=ports.free_port(), broker_ports="none",
                            advertise=BOOTSTRAP, listener_yaml=listener, log_level="debug", drain_timeout=f"{drain_timeout}s")
                for x in "ab"]
    a, b = replicas
    with contextlib.ExitStack() as stack:
        for kp in replicas:
            stack.enter_context(kp)
        cluster_id = kh.metadata("127.0.0.1", kafka_cluster.nodes[0].ports["PLAINTEXT"]).cluster_id
        advertised = {n.node_id: (f"broker-{n.node_id}.{DOMAIN}", front) for n in kafka_cluster.nodes}

        haproxy = _haproxy_passthrough(tmp_path, front, [a.port, b.port])
        stack.callback(lambda: (haproxy.terminate(), haproxy.wait(10)))
        monkeypatch.setenv("JAVA_TOOL_OPTIONS", f"-Djdk.net.hosts.file={hosts_file}")
        boot = f"{BOOTSTRAP}:{front}"
        tls = java_tls(sni_pki)
        watch = stack.enter_context(BrokerConnectionWatch(
            kafka_cluster, lambda: {kp.proc.pid for kp in replicas if kp.alive()} | {haproxy.pid}, front))

        consumer = clients.start_java("ReadCommittedConsumer", [
            "--bootstrap", boot, "--topic", topic_name, "--expect", 2000, "--timeout-ms", 150000, "--key-prefix", "dr-",
            "--group", f"g-{topic_name}", *tls])
        stack.callback(consumer.kill)
        producer = clients.start_java("TxnProducer", [
            "--bootstrap", boot, "--topic", topic_name, "--records", 3000, "--transactions", 60, "--abort-every", 3,
            "--key-prefix", "dr-", "--pause-ms", 200, "--progress", "true", *tls])
        stack.callback(producer.kill)

        def last_txn() -> int:
            done = re.findall(r"^txn (\d+) ", producer.stdout(), re.M)
            return int(done[-1]) if done else 0

        figures = {}
        for step, (kp, other) in enumerate(((a, b), (b, a))):
            # Traffic flows (through both replicas the first time), then this replica drains.
            producer.wait_for_line(rf"^txn {max(10, last_txn() + 5)} ", timeout=90)
            consumer.wait_for_line(r"^progress count=[1-9]", timeout=60)
            old_pid = kp.proc.pid
            live = kp.metric("kproxy_connections", side="client")
            assert live > 0, f"{kp.name} carries no client connection: its drain would move nothing"
            figures[f"{kp.name} client connections at drain"] = live
            figures[f"{kp.name} drain s"] = round(_drain(kp, drain_timeout), 2)
            figures[f"{kp.name} drained at txn"] = last_txn()
            assert producer.proc.poll() is None, "the producer finished before the drain: nothing was tested"
            # The producer goes on through the other replica while this one is down.
            producer.wait_for_line(rf"^txn {last_txn() + 2} ", timeout=60)
            # Back in HAProxy's rotation at once: it asks the bootstrap for the brokers itself.
            kp.restart()
            assert kp.proc.pid != old_pid and kp.alive()
            if step == 1:
                # Everything B carried moved to the restarted A: A serves again.
                deadline = time.monotonic() + slowness.scaled(30)
                while _served_counts(other) == 0:
                    assert time.monotonic() < deadline, f"restarted {other.name} served nothing: {sni_counts(other)}"
                    time.sleep(0.1)
                figures[f"{other.name} served after restart"] = _served_counts(other)

        prod = producer.result(timeout=180)
        cons = consumer.result(timeout=180)
        print(json.dumps({"figures": figures, "producer": {k: v for k, v in prod.items() if k != "_stderr"},
                          "consumer": {k: v for k, v in cons.items() if k != "_stderr"}, "watch": watch.summary()}))
        assert prod["ok"] and prod["error"] is None, prod
        assert (prod["records_committed"], prod["transactions_committed"], prod["records_aborted"]) == (2000, 40, 1000), prod
        assert prod["error_aborts"] == {}, prod
        assert cons["ok"] and cons["error"] is None, cons
        assert (cons["count"], cons["unique_keys"], cons["duplicates"], cons["content_mismatches"]) == (2000, 2000, 0, 0), cons
        # The drains cost the clients reconnections (each client's connections to the drained
        # replica were closed and opened again through the other), nothing else.
        assert prod["connection_creation_total"] > prod["connection_close_total"] > 0, prod
        assert cons["connection_creation_total"] > cons["connection_close_total"] > 0, cons
        for name, out in (("producer", prod), ("consumer", cons)):
            unexpected = _unexpected_client_lines(out["_stderr"])
            assert not unexpected, f"{name} logged more than retriable conditions:\n" + "\n".join(unexpected[:20])

        # B (restarted last) serves too: a new read_committed group through HAProxy's port opens
        # several connections, which round robin hands to both replicas.
        b_before = _served_counts(b)
        again = clients.read_committed(boot, topic_name, 2000, *tls, key_prefix="dr-", group=f"g2-{topic_name}")
        assert (again["ok"], again["count"], again["duplicates"]) == (True, 2000, 0), again
        assert _served_counts(b) > b_before, sni_counts(b)
        assert _served_counts(a) > 0, sni_counts(a)
        for kp in replicas:
            assert sni_counts(kp)["unknown_node"] == 0, (kp.name, sni_counts(kp))  # no connection went to the wrong broker
        watch.assert_only_proxies_reach_brokers()
        for kp in replicas:
            assert kp.stop() == 0


def test_a_fresh_replica_serves_a_broker_name_at_the_named_broker(kafka_cluster, sni_pki):
    """What a replica that just (re)started does with a connection for `broker-N` from a client
    whose metadata came from another replica: it must reach node N. Checked the way the Kafka 4.4
    Java client checks it: ApiVersions v5 naming the cluster id and node id it means to reach. The
    replica asks the bootstrap for the brokers once (kproxy_proxy_broker_discoveries_total), all
    first connection waits for that one request; the others find the brokers known."""
    cluster_id = kh.metadata("127.0.0.1", kafka_cluster.nodes[0].ports["PLAINTEXT"]).cluster_id
    with gateway(kafka_cluster, sni_pki, name="gw-fresh") as kp:
        errors = {}
        for n in kafka_cluster.nodes:
            raw = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
            with _tls_context(sni_pki).wrap_socket(raw, server_hostname=f"broker-{n.node_id}.{DOMAIN}") as s:
                errors[n.node_id] = _api_versions_v5_error(s, cluster_id, n.node_id)
        unknown = sni_counts(kp)["unknown_node"]
        asked = kp.metric("kproxy_proxy_broker_discoveries_total")
        failed = kp.metric("kproxy_proxy_broker_discovery_failures_total")
        assert kp.stop() == 0
    assert unknown == 0 and errors == {n.node_id: 0 for n in kafka_cluster.nodes}, (unknown, errors)
    assert (asked, failed) == (1, 0), (asked, failed)


# ---- a fresh replica in front of a TLS cluster: the discovery speaks TLS too ---------------------

@pytest.mark.parametrize("listener, learns", [("SSL", True), ("SASL_SSL", False)])
def test_a_fresh_replica_asks_a_tls_bootstrap_for_the_brokers(kafka, tls_pki, sni_pki, listener, learns):
    """A replica in front of the shared broker's TLS listener (upstream_tls) that knows no broker:
    a connection for broker-N makes it ask the bootstrap over TLS, then reach node N (ApiVersions
    v5 names it, KIP-1242). On a SASL_SSL listener the broker closes the unauthenticated Metadata
    request: the discovery fails, is counted, and the connection is served at the bootstrap."""
    node = kafka.nodes[0].node_id
    cluster_id = kh.metadata("127.0.0.1", kafka.nodes[0].ports["PLAINTEXT"]).cluster_id
    yaml = (f"    tls:\n      cert: {sni_pki.gateway.cert}\n      key: {sni_pki.gateway.key}\n"
            f"    upstream_tls:\n      ca: {tls_pki.ca}\n"
            f"    sni:\n      bootstrap: {BOOTSTRAP}\n      broker: \"{PATTERN}\"\n")
    with ChaosKproxy(kafka.bootstrap(listener), name=f"gw-tls-{listener.lower()}", port=ports.free_port(), broker_ports="none",
                     advertise=BOOTSTRAP, listener_yaml=yaml, log_level="debug") as kp:
        raw = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
        with _tls_context(sni_pki).wrap_socket(raw, server_hostname=f"broker-{node}.{DOMAIN}") as s:
            if learns:
                assert _api_versions_v5_error(s, cluster_id, node) == 0
            else:
                s.sendall(request(18, 0, 1, b""))  # ApiVersions v0: any broker answers it, even before SASL
                assert struct.unpack(">ih", recv_frame(s)[:6])[1] == 0
        asked = kp.metric("kproxy_proxy_broker_discoveries_total")
        failed = kp.metric("kproxy_proxy_broker_discovery_failures_total")
        counts = sni_counts(kp)
        if learns:
            kp.wait_for_log(rf"learnt brokers {node} at 127\.0\.0\.1:{kafka.nodes[0].ports[listener]} from the bootstrap")
            kp.wait_for_log(rf"TLS with broker 127\.0\.0\.1:{kafka.nodes[0].ports[listener]}: TLSv1\.3")
        else:
            kp.wait_for_log(r"the bootstrap named no broker \(the broker closed the connection before it answered")
        assert kp.stop() == 0
    assert (asked, failed) == (1, 0 if learns else 1)
    assert counts.get("broker", 0) == (1 if learns else 0) and counts.get("unknown_node", 0) == (0 if learns else 1), counts
