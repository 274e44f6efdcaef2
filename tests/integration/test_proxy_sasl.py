"""SASL through kproxy (issue #4, item 7): Java and librdkafka with PLAIN and SCRAM-SHA-256
(SaslHandshake v1 + SaslAuthenticate), and the legacy SaslHandshake v0 flow whose tokens travel as
bare frames without a Kafka header (docs/protocol.md "SASL"), written by hand here since no current client
uses it. kproxy passes the tokens through untouched and rewrites the Metadata after them."""

import socket

import pytest

import clients
import kafka_harness as kh
from test_proxy_support import (Kproxy, connection_closed, frame, metadata_brokers, recv_frame,
                                sasl_handshake_v0, scram_v0_exchange)


def _sasl_proxy(kafka, name):
    return Kproxy(kafka.bootstrap("SASL_PLAINTEXT"), name=name)


def test_java_transactions_with_sasl_plain_and_scram(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=2)
    with _sasl_proxy(kafka, "sasl-java") as kp:
        for i, mechanism in enumerate(("PLAIN", "SCRAM-SHA-256")):
            prod = clients.txn_produce(kp.bootstrap, topic_name, 200, 4, *clients.sasl_args(mechanism), key_prefix=f"m{i}-")
            assert prod["ok"], prod
            cons = clients.read_committed(kp.bootstrap, topic_name, 200, *clients.sasl_args(mechanism), key_prefix=f"m{i}-",
                                          group=f"g-{i}-{topic_name}")
            assert cons["ok"], cons
            assert (cons["count"], cons["duplicates"]) == (200, 0)
        assert kp.stop() == 0



@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_librdkafka_with_sasl(kafka, topic_name, mechanism):
    kafka.create_topic(topic_name, partitions=2)
    with _sasl_proxy(kafka, "sasl-rd") as kp:
        conf = kh.sasl_client_config(mechanism)
        prod = clients.rd_produce(kp.bootstrap, topic_name, 100, key_prefix="s-", conf=conf, timeout=20)
        assert prod["errors"] == [] and prod["delivered"] == 100
        cons = clients.rd_consume(kp.bootstrap, topic_name, 100, key_prefix="s-", conf=conf)
        assert cons["count"] == 100, cons
        assert kp.stop() == 0


def test_sasl_handshake_v0_plain_raw_token(kafka):
    with _sasl_proxy(kafka, "sasl-v0-plain") as kp:
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            sasl_handshake_v0(s, "PLAIN")
            s.sendall(frame(b"\x00alice\x00" + kh.PLAIN_USERS["alice"].encode()))  # RFC 4616 token, no header
            assert recv_frame(s) == b""  # the broker's (empty) raw answer, passed through untouched
            assert metadata_brokers(s, 2) == [(n.node_id, "127.0.0.1", kp.broker_port(n.node_id)) for n in kafka.nodes]
        # A wrong password: the broker closes, and so does kproxy.
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            sasl_handshake_v0(s, "PLAIN")
            s.sendall(frame(b"\x00alice\x00wrong"))
            assert connection_closed(s, 10)
        assert "mismatch" not in kp.log_text()
        assert kp.stop() == 0


def test_sasl_handshake_v0_scram_raw_tokens(kafka):
    user = "bob"
    password = kh.SCRAM_USERS[user]
    with _sasl_proxy(kafka, "sasl-v0-scram") as kp:
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            sasl_handshake_v0(s, "SCRAM-SHA-256")
            server_final = scram_v0_exchange(s, "SCRAM-SHA-256", user, password)
            assert server_final.startswith("v="), server_final
            assert metadata_brokers(s, 9) == [(n.node_id, "127.0.0.1", kp.broker_port(n.node_id)) for n in kafka.nodes]
        assert "mismatch" not in kp.log_text()
        assert kp.stop() == 0
