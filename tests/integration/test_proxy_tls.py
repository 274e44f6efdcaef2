"""TLS through kproxy (issue #9) against a real Kafka 4.4.0 broker with SSL and SASL_SSL listeners.

The broker is the session's shared single node (conftest.kafka), which has these listeners too;
its certificates are made with the `openssl` tool (tls_pki.py, conftest.tls_pki): the SSL and SASL_SSL listeners serve a good certificate; three more SSL listeners
serve an expired one (EXPIRED), one for another host (WRONGHOST), demand a client
certificate (MTLS), and advertise the host name "localhost" instead of 127.0.0.1 (BYNAME). Each combination carries records with the Java client and librdkafka:

    plaintext client -> kproxy -> TLS broker        (the sidecar case)
    TLS client       -> kproxy -> plaintext broker
    TLS client       -> kproxy -> TLS broker         (with client certificates on both legs)
    SASL_SSL: PLAIN, SCRAM-SHA-256/512 (SaslHandshake v1), and v0 raw tokens over TLS

and each failure gives its message in kproxy's log, with the peer's address.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
import urllib.request

import pytest

import clients
import kafka_harness as kh
import ports
from test_proxy_support import (CompactBuf, Kproxy, compact_str, connection_closed, frame, metadata_brokers, recv_frame,
                                request, sasl_handshake_v0, scram_v0_exchange, uvarint)


@pytest.fixture
def pki(tls_pki):
    """The session PKI (conftest.tls_pki): the certificates the shared broker's TLS listeners serve."""
    return tls_pki


@pytest.fixture
def tls_kafka(kafka):
    """The shared single node (conftest.kafka), which has the SSL, SASL_SSL, EXPIRED, WRONGHOST,
    MTLS and BYNAME listeners these tests use."""
    return kafka


def upstream_tls(ca, cert=None, key=None) -> str:
    out = f"    upstream_tls:\n      ca: {ca}\n"
    if cert:
        out += f"      cert: {cert}\n      key: {key}\n"
    return out


def client_tls(pki, client_ca=None) -> str:
    out = f"    tls:\n      cert: {pki.kproxy.cert}\n      key: {pki.kproxy.key}\n"
    if client_ca:
        out += f"      client_ca: {client_ca}\n"
    return out


def java_tls(pki, protocol="SSL", keystore=None):
    args = ["--security-protocol", protocol, "--property", "ssl.truststore.type=PEM",
            "--property", f"ssl.truststore.location={pki.ca}"]
    if keystore:
        args += ["--property", "ssl.keystore.type=PEM", "--property", f"ssl.keystore.location={keystore}"]
    return args


def rd_tls(pki, conf=None):
    c = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    c.update(conf or {})
    return c


def java_round_trip(kp, topic, prefix, *extra):
    prod = clients.txn_produce(kp.bootstrap, topic, 60, 2, *extra, key_prefix=prefix)
    assert prod["ok"], prod
    cons = clients.read_committed(kp.bootstrap, topic, 60, *extra, key_prefix=prefix, group=f"g-{prefix}{topic}")
    assert cons["ok"], cons
    assert (cons["count"], cons["duplicates"]) == (60, 0)


def rd_round_trip(kp, topic, prefix, conf, timeout=30):
    prod = clients.rd_produce(kp.bootstrap, topic, 60, key_prefix=prefix, conf=conf, timeout=timeout)
    assert prod["errors"] == [] and prod["delivered"] == 60, prod
    cons = clients.rd_consume(kp.bootstrap, topic, 60, key_prefix=prefix, conf=conf, timeout=timeout)
    assert cons["count"] == 60 and cons["duplicates"] == 0, cons


def tls_socket(pki, port, cafile=None, cert=None):
    ctx = ssl.create_default_context(cafile=str(cafile or pki.ca))
    if cert:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def api_versions_via(sock) -> int:
    """ApiVersions v0 over `sock`; the error code of the answer."""
    sock.sendall(request(18, 0, 7, b""))
    r = kh._Buf(recv_frame(sock))
    assert r.int32() == 7
    return r.int16()


def attempt(kp) -> None:
    """One plaintext ApiVersions through kproxy; the connection may fail (that is what is tested)."""
    with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
        s.sendall(request(18, 0, 7, b""))
        assert connection_closed(s, 10)


# ---- the combinations ------------------------------------------------------------------------

def test_plaintext_clients_to_a_tls_cluster(tls_kafka, pki, topic_name):
    tls_kafka.create_topic(topic_name, partitions=2)
    ssl_port = tls_kafka.nodes[0].ports["SSL"]
    with Kproxy(tls_kafka.bootstrap("SSL"), name="tls-up", listener_yaml=upstream_tls(pki.ca)) as kp:
        java_round_trip(kp, topic_name, "j-")
        rd_round_trip(kp, topic_name, "rd-", {})
        log = kp.log_text()
        assert f"brokers are reached over TLS: TLS 1.2+, CA {pki.ca}, hostname verified" in log
        # The bootstrap connection and the broker-port connections all speak TLS 1.3 to the broker.
        assert log.count(f"TLS with broker 127.0.0.1:{ssl_port}: TLSv1.3") >= 2, log[-3000:]
        assert "failed" not in log
        assert kp.stop() == 0


def test_brokers_reached_by_host_name_get_sni_and_name_verification(tls_kafka, pki, topic_name):
    """Bootstrap and broker-port connections to a listener that advertises "localhost": each sends
    SNI localhost and checks the certificate's DNS name; a certificate for another name is refused."""
    tls_kafka.create_topic(topic_name, partitions=1)
    port = tls_kafka.nodes[0].ports["BYNAME"]
    with Kproxy(f"localhost:{port}", name="tls-byname", listener_yaml=upstream_tls(pki.ca)) as kp:
        rd_round_trip(kp, topic_name, "n-", {})
        log = kp.log_text()
        # conn 1 is Kproxy.start()'s probe; the clients' bootstrap and broker-port connections follow.
        assert log.count(f"TLS with broker localhost:{port} (127.0.0.1:{port}): TLSv1.3 ") >= 2, log[-3000:]
        assert log.count(f"(127.0.0.1:{port}): TLSv1.3 ") == log.count(", SNI localhost"), log[-3000:]
        assert kp.stop() == 0
    wrong = tls_kafka.nodes[0].ports["WRONGHOST"]
    with Kproxy(f"localhost:{wrong}", name="tls-byname-wrong", listener_yaml=upstream_tls(pki.ca)) as kp:
        attempt(kp)
        kp.wait_for_log(rf"TLS with broker localhost:{wrong} \(127\.0\.0\.1:{wrong}\) failed: hostname mismatch: "
                        r"the broker's certificate \(CN=wronghost\) is not valid for 'localhost'")
        assert kp.stop() == 0


def test_tls_clients_to_a_plaintext_cluster(tls_kafka, pki, topic_name):
    tls_kafka.create_topic(topic_name, partitions=2)
    with Kproxy(tls_kafka.bootstrap(), name="tls-down", listener_yaml=client_tls(pki)) as kp:
        java_round_trip(kp, topic_name, "j-", *java_tls(pki))
        rd_round_trip(kp, topic_name, "rd-", rd_tls(pki))
        log = kp.log_text()
        assert f"clients speak TLS: TLS 1.2+, certificate {pki.kproxy.cert}" in log
        assert "TLS with client 127.0.0.1:" in log and ": TLSv1.3 " in log
        assert " failed: " not in log
        assert kp.stop() == 0


def test_tls_on_both_legs_with_client_certificates(tls_kafka, pki, topic_name):
    """Java and librdkafka present certificates to kproxy, kproxy presents its own to the MTLS listener."""
    tls_kafka.create_topic(topic_name, partitions=2)
    legs = client_tls(pki, client_ca=pki.ca) + upstream_tls(pki.ca, pki.kproxy_client.cert, pki.kproxy_client.key)
    with Kproxy(tls_kafka.bootstrap("MTLS"), name="tls-both", listener_yaml=legs) as kp:
        java_round_trip(kp, topic_name, "j-", *java_tls(pki, keystore=pki.app.keystore))
        rd_round_trip(kp, topic_name, "rd-", rd_tls(pki, {"ssl.certificate.location": str(pki.app.cert),
                                                          "ssl.key.location": str(pki.app.key)}))
        log = kp.log_text()
        assert "client certificates required" in log
        assert f"client certificate {pki.kproxy_client.cert}" in log
        assert f"TLS with broker 127.0.0.1:{tls_kafka.nodes[0].ports['MTLS']}: TLSv1.3" in log
        assert " failed: " not in log
        # A client without a certificate is refused by kproxy, with the reason.
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with tls_socket(pki, kp.port) as s:
                api_versions_via(s)
        kp.wait_for_log(r"TLS with client 127\.0\.0\.1:\d+ failed: no certificate: the client sent none and one is required")
        assert kp.stop() == 0


@pytest.mark.parametrize("client_leg", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_java_sasl_over_tls(tls_kafka, pki, topic_name, client_leg):
    """PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (SaslHandshake v1 + SaslAuthenticate) to the SASL_SSL
    listener, the client speaking TLS to kproxy or not."""
    tls_kafka.create_topic(topic_name, partitions=2)
    legs = upstream_tls(pki.ca) + (client_tls(pki) if client_leg == "SASL_SSL" else "")
    extra = java_tls(pki, protocol="SASL_SSL") if client_leg == "SASL_SSL" else ["--security-protocol", "SASL_PLAINTEXT"]
    with Kproxy(tls_kafka.bootstrap("SASL_SSL"), name="tls-sasl", listener_yaml=legs) as kp:
        mechanisms = ("PLAIN", "SCRAM-SHA-512") if client_leg == "SASL_SSL" else ("SCRAM-SHA-256",)
        for i, mechanism in enumerate(mechanisms):
            java_round_trip(kp, topic_name, f"m{i}-", *extra, *clients.sasl_args(mechanism))
        assert " failed: " not in kp.log_text()
        assert kp.stop() == 0



@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_librdkafka_sasl_ssl(tls_kafka, pki, topic_name, mechanism):
    tls_kafka.create_topic(topic_name, partitions=2)
    with Kproxy(tls_kafka.bootstrap("SASL_SSL"), name="tls-sasl-rd", listener_yaml=client_tls(pki) + upstream_tls(pki.ca)) as kp:
        conf = kh.sasl_client_config(mechanism)
        conf.update({"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca)})
        rd_round_trip(kp, topic_name, "s-", conf, timeout=30 if mechanism == "PLAIN" else 10)
        assert kp.stop() == 0


def test_sasl_handshake_v0_raw_tokens_over_tls(tls_kafka, pki):
    """The v0 flow's bare token frames (PLAIN, then SCRAM-SHA-512's three) pass through both TLS legs
    untouched; Metadata after them is rewritten."""
    with Kproxy(tls_kafka.bootstrap("SASL_SSL"), name="tls-sasl-v0", listener_yaml=client_tls(pki) + upstream_tls(pki.ca)) as kp:
        with tls_socket(pki, kp.port) as s:
            sasl_handshake_v0(s, "PLAIN")
            s.sendall(frame(b"\x00alice\x00" + kh.PLAIN_USERS["alice"].encode()))
            assert recv_frame(s) == b""
            assert metadata_brokers(s, 2) == [(1, "127.0.0.1", kp.broker_port(1))]
        with tls_socket(pki, kp.port) as s:
            sasl_handshake_v0(s, "SCRAM-SHA-512")
            assert scram_v0_exchange(s, "SCRAM-SHA-512", "bob", kh.SCRAM_USERS["bob"]).startswith("v=")
            assert metadata_brokers(s, 3) == [(1, "127.0.0.1", kp.broker_port(1))]
        assert "mismatch" not in kp.log_text()
        assert kp.stop() == 0


def _metrics(admin_port) -> str:
    """GET /metrics; the admin API starts just after the listeners, so wait for it briefly."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=10).read().decode()
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _tls_failures_metric(admin_port) -> float:
    text = _metrics(admin_port)
    for line in text.splitlines():
        if line.startswith("kproxy_proxy_tls_failures_total "):
            return float(line.split()[1])
    raise AssertionError("kproxy_proxy_tls_failures_total missing from /metrics")


def _find_coordinator_over(sock, key, cid):
    """FindCoordinator v4 over `sock` -> [(node_id, host, port, error_code)]."""
    sock.sendall(request(10, 4, cid, bytes([0]) + uvarint(2) + compact_str(key) + b"\x00", flexible=True))
    r = CompactBuf(recv_frame(sock))
    assert r.int32() == cid
    r.skip_tags()
    r.int32()

    def coordinator(b):
        b.compact_string()
        node, h, p, err = b.int32(), b.compact_string(), b.int32(), b.int16()
        b.compact_string()
        b.skip_tags()
        return (node, h, p, err)
    return r.compact_array(coordinator)


def test_fault_rules_metrics_and_rewrite_see_plaintext_between_tls_legs(tls_kafka, pki):
    admin_port = kh.free_ports(1)[0]
    faults = ("faults:\n  - name: coordinator-once\n    match: { api: FindCoordinator }\n"
              "    action: { error: COORDINATOR_NOT_AVAILABLE }\n    trigger: { times: 1 }\n")
    with Kproxy(tls_kafka.bootstrap("SSL"), name="tls-stages", listener_yaml=client_tls(pki) + upstream_tls(pki.ca),
                extra_yaml=f"admin:\n  listen: 127.0.0.1:{admin_port}\n" + faults) as kp:
        with tls_socket(pki, kp.port) as s:
            assert [c[3] for c in _find_coordinator_over(s, "g-tls", 1)] == [15]  # injected by kproxy (counted below)
            # The broker's own answers (COORDINATOR_NOT_AVAILABLE until __consumer_offsets exists), rewritten.
            sent, answer = 1, None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                sent += 1
                answer = _find_coordinator_over(s, "g-tls", sent)
                if answer[0][3] == 0:
                    break
                time.sleep(0.2)
            assert answer == [(1, "127.0.0.1", kp.broker_port(1), 0)]
        text = _metrics(admin_port)

        def value(name, api):
            lines = [x for x in text.splitlines() if x.startswith(name + "{") and f'api="{api}"' in x]
            return sum(float(x.split()[-1]) for x in lines)
        assert value("kproxy_requests_total", "FindCoordinator") == sent
        assert value("kproxy_faults_injected_total", "FindCoordinator") == 1
        assert kp.stop() == 0


# ---- failures, each with its message ---------------------------------------------------------

@pytest.mark.parametrize("listener,ca,expected", [
    ("SSL", "unrelated", r"failed: unknown CA: the broker's certificate \(CN=broker\) is not signed by a trusted CA"),
    ("WRONGHOST", "ca", r"failed: hostname mismatch: the broker's certificate \(CN=wronghost\) is not valid for '127\.0\.0\.1'"),
    ("EXPIRED", "ca", r"failed: certificate expired: the broker's certificate \(CN=expired\) expired on \w+ +\d+ [\d:]+ \d+ GMT"),
    ("MTLS", "ca", r"failed: the broker rejected the handshake: sslv3 alert bad certificate \(kproxy sent no client "
                   r"certificate: if the broker requires one, set upstream_tls\.cert and key\)"),
    ("PLAINTEXT", "ca", r"failed: the broker closed the connection during the TLS handshake \(a plaintext port\?"),
])
def test_upstream_tls_failures_say_why(tls_kafka, pki, listener, ca, expected):
    port = tls_kafka.nodes[0].ports[listener]
    cafile = pki.unrelated_ca if ca == "unrelated" else pki.ca
    with Kproxy(tls_kafka.bootstrap(listener), name=f"tls-fail-{listener.lower()}", listener_yaml=upstream_tls(cafile)) as kp:
        attempt(kp)
        kp.wait_for_log(rf"closed: TLS with broker 127\.0\.0\.1:{port} failed: .*")
        kp.wait_for_log(rf"TLS with broker 127\.0\.0\.1:{port} {expected}")
        assert kp.alive()
        assert kp.stop() == 0


def test_a_tls_handshake_that_never_answers_times_out(pki):
    """A listener that accepts and never answers the ClientHello: limits.connect_timeout covers the handshake."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", ports.free_port()))
    silent.listen(8)
    port = silent.getsockname()[1]
    try:
        with Kproxy(f"127.0.0.1:{port}", name="tls-silent", listener_yaml=upstream_tls(pki.ca),
                    limits={"connect_timeout": "1s"}) as kp:
            with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
                s.sendall(request(18, 0, 7, b""))
                t0 = time.monotonic()
                assert connection_closed(s, 10)
                assert time.monotonic() - t0 < 5
            kp.wait_for_log(rf"closed: upstream unavailable: TLS handshake with 127\.0\.0\.1:{port} timed out "
                            r"\(the broker never answered the ClientHello\)")
            assert kp.stop() == 0
    finally:
        silent.close()


def test_client_leg_protocol_and_trust_failures(tls_kafka, pki):
    admin_port = kh.free_ports(1)[0]
    with Kproxy(tls_kafka.bootstrap(), name="tls-client-fail", listener_yaml=client_tls(pki),
                extra_yaml=f"admin:\n  listen: 127.0.0.1:{admin_port}\n") as kp:
        assert _tls_failures_metric(admin_port) == 0  # the start-up probe connected and closed: no TLS failure
        # A plaintext Kafka client on the TLS port.
        attempt(kp)
        kp.wait_for_log(r"TLS with client 127\.0\.0\.1:\d+ failed: protocol mismatch: the client does not speak TLS "
                        r"\(first byte 0x00, not a TLS handshake record\): a plaintext client on a TLS port\?")
        # A TLS client that does not trust kproxy's certificate.
        with pytest.raises(ssl.SSLCertVerificationError):
            tls_socket(pki, kp.port, cafile=pki.unrelated_ca)
        kp.wait_for_log(r"TLS with client 127\.0\.0\.1:\d+ failed: the client rejected the handshake: tlsv1 alert unknown ca")
        assert _tls_failures_metric(admin_port) == 2
        assert kp.stop() == 0
    # A TLS client on a plaintext port: kproxy recognises the ClientHello.
    with Kproxy(tls_kafka.bootstrap(), name="tls-on-plain") as kp:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            tls_socket(pki, kp.port)
        kp.wait_for_log(r"bad request framing: TLS handshake bytes on a plaintext port")
        assert kp.stop() == 0


def test_a_client_that_stalls_its_tls_handshake_is_closed_after_the_timeout(tls_kafka, pki):
    """limits.tls_handshake_timeout: a client that connects to a TLS port and sends nothing, or half
    a ClientHello, is closed with the reason logged and counted; a client that completes its
    handshake meanwhile is served and stays open past the timeout."""
    admin_port = kh.free_ports(1)[0]
    with Kproxy(tls_kafka.bootstrap(), name="tls-stall", listener_yaml=client_tls(pki), limits={"tls_handshake_timeout": "1s"},
                extra_yaml=f"admin:\n  listen: 127.0.0.1:{admin_port}\n") as kp:
        assert _tls_failures_metric(admin_port) == 0
        silent = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
        half = socket.create_connection(("127.0.0.1", kp.port), timeout=10)
        # A handshake record header announcing 512 bytes (RFC 8446 5.1), then only 10 of them.
        half.sendall(bytes([22, 3, 1, 2, 0]) + bytes([1, 0, 1, 252]) + bytes(6))
        t0 = time.monotonic()
        with tls_socket(pki, kp.port) as good:
            assert api_versions_via(good) == 0
            for s in (silent, half):
                assert connection_closed(s, 10)
                s.close()
            waited = time.monotonic() - t0
            assert 0.8 <= waited < 5, f"closed after {waited:.2f} s, expected about 1 s"
            assert api_versions_via(good) == 0  # past the timeout: the finished handshake is not affected
        kp.wait_for_log(r"TLS with client 127\.0\.0\.1:\d+ failed: handshake not finished within 1000 ms "
                        r"\(limits\.tls_handshake_timeout\)")
        assert kp.log_text().count("handshake not finished within 1000 ms") == 2
        assert _tls_failures_metric(admin_port) == 2
        assert kp.stop() == 0


def test_kproxy_plaintext_to_a_tls_listener_says_so(tls_kafka, pki):
    """upstream_tls forgotten: the broker's TLS listener gets a plaintext request."""
    with Kproxy(tls_kafka.bootstrap("SSL"), name="plain-to-tls") as kp:
        attempt(kp)
        kp.wait_for_log(rf"closed: protocol mismatch: broker 127\.0\.0\.1:{tls_kafka.nodes[0].ports['SSL']} answered with TLS "
                        r"\(a TLS listener\? set upstream_tls\)")
        assert kp.stop() == 0


def test_bad_certificate_files_are_refused_with_their_position(pki, tmp_path):
    """check-config and start-up read the PEM files: file:line:column, the key, the file, why."""
    from test_proxy_support import kproxy_binary
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    config = tmp_path / "kproxy.yaml"
    port = kh.free_ports(1)[0]
    config.write_text("listeners:\n"
                      f"  - listen: 127.0.0.1:{port}\n"
                      "    upstream: 127.0.0.1:9\n"
                      "    broker_ports: 9100\n"
                      "    tls:\n"
                      f"      cert: {garbage}\n"
                      f"      key: {pki.kproxy.key}\n"
                      "    upstream_tls:\n"
                      f"      ca: {tmp_path / 'missing-ca.pem'}\n")
    r = subprocess.run([kproxy_binary(), "check-config", str(config)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith(f"{config}:6:13: listeners[0].tls.cert: cannot load '{garbage}': not a PEM certificate chain"), r.stderr
    assert lines[1] == (f"{config}:9:11: listeners[0].upstream_tls.ca: cannot load '{tmp_path / 'missing-ca.pem'}': "
                        "No such file or directory"), r.stderr
    # The start runs the same checks (proxy/runtime/startup_check.h): exit 2, the same lines.
    started = subprocess.run([kproxy_binary(), "--config", str(config)], capture_output=True, text=True, timeout=30)
    assert started.returncode == 2
    assert started.stderr.strip().splitlines()[:2] == lines[:2], started.stderr


# ---- certificates reloaded ---------------------------------------------------------------------

def _served_cn(pki, port) -> str:
    with tls_socket(pki, port) as s:
        subject = dict(x[0] for x in s.getpeercert()["subject"])
        assert api_versions_via(s) == 0
        return subject["commonName"]


def test_certificates_are_reloaded_and_a_bad_file_keeps_the_old_ones(tls_kafka, pki, tmp_path):
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    first = pki.issue("kproxy-first", "IP:127.0.0.1")
    second = pki.issue("kproxy-second", "IP:127.0.0.1")
    cert.write_bytes(first.cert.read_bytes())
    key.write_bytes(first.key.read_bytes())
    admin_port = kh.free_ports(1)[0]
    with Kproxy(tls_kafka.bootstrap(), name="tls-reload", listener_yaml=f"    tls:\n      cert: {cert}\n      key: {key}\n",
                extra_yaml=f"admin:\n  listen: 127.0.0.1:{admin_port}\n") as kp:
        assert _served_cn(pki, kp.port) == "kproxy-first"
        cert.write_bytes(second.cert.read_bytes())
        key.write_bytes(second.key.read_bytes())
        kp.signal(__import__("signal").SIGHUP)
        kp.wait_for_log(r"config reloaded from .*TLS certificates apply to new connections")
        assert _served_cn(pki, kp.port) == "kproxy-second"
        # A certificate file that does not load refuses the reload (POST /reload) and keeps the old one.
        cert.write_text("not a certificate\n")
        req = urllib.request.Request(f"http://127.0.0.1:{admin_port}/reload", method="POST", data=b"")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=10)
        assert refused.value.code == 400
        body = refused.value.read().decode()
        assert "listeners[0].tls.cert: cannot load" in body and "not a PEM certificate chain" in body, body
        time.sleep(0.2)
        assert _served_cn(pki, kp.port) == "kproxy-second"
        assert kp.stop() == 0
