"""(c) librdkafka (confluent_kafka) against the same real single broker."""

import pytest

import clients
import kafka_harness as kh


def test_librdkafka_produce_and_consume(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=3)
    prod = clients.rd_produce(kafka.bootstrap(), topic_name, 500)
    assert prod["errors"] == []
    assert prod["delivered"] == 500
    assert sum(prod["partitions"].values()) == 500
    # Idempotent producer on a fresh topic: offsets 0..n-1 per partition, no gaps.
    for p, (lo, hi) in prod["offsets"].items():
        assert (lo, hi) == (0, prod["partitions"][p] - 1)

    cons = clients.rd_consume(kafka.bootstrap(), topic_name, 500, key_prefix="rd-")
    assert cons["errors"] == []
    assert (cons["count"], cons["unique_keys"], cons["duplicates"]) == (500, 500, 0)
    assert cons["content_mismatches"] == 0
    assert cons["partitions"] == prod["partitions"]


def test_librdkafka_transactions_read_by_java(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=2)
    out = clients.rd_txn_produce(kafka.bootstrap(), topic_name, 300, 6, abort_every=3)
    assert out["errors"] == []
    assert (out["records_committed"], out["records_aborted"]) == (200, 100)
    cons = clients.read_committed(kafka.bootstrap(), topic_name, 200, key_prefix="rdtx-")
    assert cons["ok"], cons
    assert (cons["count"], cons["duplicates"]) == (200, 0)


def test_java_transactions_read_by_librdkafka(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=2)
    prod = clients.txn_produce(kafka.bootstrap(), topic_name, 300, 6, abort_every=2, key_prefix="jv-")
    assert prod["ok"], prod
    cons = clients.rd_consume(kafka.bootstrap(), topic_name, 150, key_prefix="jv-", linger=2.0)
    assert cons["errors"] == []
    assert (cons["count"], cons["duplicates"], cons["content_mismatches"]) == (150, 0, 0)
    uncommitted = clients.rd_consume(kafka.bootstrap(), topic_name, 300, key_prefix="jv-",
                                     isolation="read_uncommitted")
    assert uncommitted["count"] == 300


def test_the_suite_runs_a_current_librdkafka():
    """conftest.py puts the PyPI wheel first (scripts/setup installs it); Debian's 2.0.2 would
    fail SCRAM against Kafka 4.x."""
    import confluent_kafka
    assert confluent_kafka.libversion()[1] >= 0x020601ff, (confluent_kafka.libversion(), confluent_kafka.__file__)


# librdkafka before 2.6.1 sends a doubled nonce in the SCRAM client-final-message, which Kafka 4.x
# rejects (RFC 5802); the suite runs the PyPI wheel's current librdkafka (conftest.py), so SCRAM
# must work.
@pytest.mark.sasl
@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256"])
def test_librdkafka_over_sasl(kafka, topic_name, mech):
    kafka.create_topic(topic_name, partitions=1)
    conf = kh.sasl_client_config(mech)
    prod = clients.rd_produce(kafka.bootstrap("SASL_PLAINTEXT"), topic_name, 50, conf=conf, timeout=15)
    assert (prod["delivered"], prod["errors"]) == (50, [])
    cons = clients.rd_consume(kafka.bootstrap("SASL_PLAINTEXT"), topic_name, 50, conf=conf)
    assert (cons["count"], cons["duplicates"], cons["errors"]) == (50, 0, [])
