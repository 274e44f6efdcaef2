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
import os
import re
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

import clients
import kafka_harness as kh
import ports
import slowness
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
    with gateway(kafka_cluster, sni_pki) as kp:
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
    with gateway(kafka_cluster, sni_pki) as kp:
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
    with gateway(kafka_cluster, sni_pki) as kp:
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
        counts = sni_counts(kp)
        assert counts["broker"] >= 3 and counts["bootstrap"] >= 1, counts
        assert all(counts[k] == 0 for k in counts if k not in ("broker", "bootstrap")), counts
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
        # A broker name whose node no response named yet goes to the bootstrap too, and says so.
        raw = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
        with _tls_context(sni_pki).wrap_socket(raw, server_hostname=f"broker-77.{DOMAIN}") as s:
            assert _api_versions(s) == 0
        _wait_count(kp, "unknown_node", c0["unknown_node"] + 1)
        kp.wait_for_log(r"names broker node 77, which no response named yet: served as the bootstrap")
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
        prod = rd_in_namespace(hosts_file, "rd_produce", bootstrap=boot, topic=topic_name, count=300, key_prefix="pn-", conf=conf)
        assert prod["errors"] == [] and prod["delivered"] == 300, prod
        cons = rd_in_namespace(hosts_file, "rd_consume", bootstrap=boot, topic=topic_name, expect=300, key_prefix="pn-", conf=conf)
        assert (cons["count"], cons["duplicates"]) == (300, 0), cons
        assert f"for the names it is valid for {sni_pki.dir}" in kp.log_text()
        assert kp.stop() == 0


# ---- TLS ended at a load balancer: the PROXY header's authority routes -------------------------

def _haproxy_tls(tmp_path, pki, front, kproxy_port):
    """HAProxy ending TLS on `front` (the wildcard certificate) and sending PROXY v2 with the
    authority TLV (the SNI its client sent) to kproxy."""
    pem = tmp_path / "haproxy.pem"
    pem.write_bytes(pki.gateway.cert.read_bytes() + pki.gateway.key.read_bytes())
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(
        "global\n  maxconn 200\n"
        "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n"
        f"frontend fe\n  bind 127.0.0.1:{front} ssl crt {pem}\n  default_backend be\n"
        f"backend be\n  server kproxy 127.0.0.1:{kproxy_port} send-proxy-v2 proxy-v2-options authority\n")
    proc = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + slowness.scaled(10)
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", front), timeout=0.5).close()
            return proc
        except OSError:
            assert proc.poll() is None, "haproxy exited"
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise AssertionError("haproxy did not listen")


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
            brokers = rd_in_namespace(hosts_file, "brokers", conf={"bootstrap.servers": boot, **conf})
            assert brokers == sorted(f"broker-{n.node_id}.{DOMAIN}:{front}" for n in kafka_cluster.nodes)
            prod = rd_in_namespace(hosts_file, "rd_produce", bootstrap=boot, topic=topic_name, count=300, key_prefix="pa-", conf=conf)
            assert prod["errors"] == [] and prod["delivered"] == 300, prod
            cons = rd_in_namespace(hosts_file, "rd_consume", bootstrap=boot, topic=topic_name, expect=300, key_prefix="pa-", conf=conf)
            assert (cons["count"], cons["duplicates"]) == (300, 0), cons
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
        cfg = tmp_path / "haproxy-tcp.cfg"
        cfg.write_text(
            "global\n  maxconn 200\n"
            "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n"
            f"frontend fe\n  bind 127.0.0.1:{front}\n  default_backend be\n"
            f"backend be\n  server kproxy 127.0.0.1:{kp.port} send-proxy-v2\n")
        haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + slowness.scaled(10)
            while True:
                try:
                    socket.create_connection(("127.0.0.1", front), timeout=0.5).close()
                    break
                except OSError:
                    assert haproxy.poll() is None and time.monotonic() < deadline, "haproxy did not listen"
                    time.sleep(0.05)
            boot = f"{BOOTSTRAP}:{front}"
            conf = {"security.protocol": "SSL", "ssl.ca.location": str(sni_pki.ca)}
            prod = rd_in_namespace(hosts_file, "rd_produce", bootstrap=boot, topic=topic_name, count=300, key_prefix="pt-", conf=conf)
            assert prod["errors"] == [] and prod["delivered"] == 300, prod
            cons = rd_in_namespace(hosts_file, "rd_consume", bootstrap=boot, topic=topic_name, expect=300, key_prefix="pt-", conf=conf)
            assert (cons["count"], cons["duplicates"]) == (300, 0), cons
            log = kp.log_text()
            assert "(PROXY protocol v2)" in log
            assert f"SNI '{BOOTSTRAP}': bootstrap at" in log
            assert re.search(rf"SNI 'broker-\d+\.{re.escape(DOMAIN)}': broker node \d+ at", log), log[-3000:]
        finally:
            haproxy.terminate()
            haproxy.wait(10)
        assert kp.stop() == 0
