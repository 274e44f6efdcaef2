"""(a) The Java reference clients against one real Kafka 4.4.0 broker."""

import pytest

import clients
import kafka_harness as kh


def test_broker_answers_raw_protocol_probe(kafka):
    node = kafka.nodes[0]
    versions = kh.api_versions(node.host, node.ports["PLAINTEXT"])
    for api in (0, 1, 3, 18, 22, 24, 26):  # Produce, Fetch, Metadata, ApiVersions, InitProducerId, AddPartitionsToTxn, EndTxn
        assert api in versions, f"api {api} missing from ApiVersions"
    md = kafka.metadata()
    assert md.brokers == {node.node_id: ("127.0.0.1", node.ports["PLAINTEXT"])}
    assert md.cluster_id == kafka.cluster_id
    assert md.controller_id == node.node_id
    # The SASL listener answers ApiVersions before authentication (KIP-35/KIP-43).
    assert 17 in kh.api_versions(node.host, node.ports["SASL_PLAINTEXT"])  # SaslHandshake


def test_java_transactions_1000_records_in_10_transactions(kafka, topic_name):
    topic = kafka.create_topic(topic_name, partitions=3)
    assert sorted(topic.partitions) == [0, 1, 2]

    prod = clients.txn_produce(kafka.bootstrap(), topic_name, 1000, 10)
    assert prod["ok"], prod
    assert prod["records_committed"] == 1000
    assert prod["transactions_committed"] == 10
    assert sum(prod["partitions"].values()) == 1000

    cons = clients.read_committed(kafka.bootstrap(), topic_name, 1000)
    assert cons["ok"], cons
    assert cons["count"] == 1000, "loss or extra records"
    assert cons["unique_keys"] == 1000
    assert cons["duplicates"] == 0
    assert cons["content_mismatches"] == 0
    assert cons["timed_out"] is False
    # Same records landed where the producer said they did.
    assert cons["partitions"] == prod["partitions"]


def test_aborted_transactions_are_invisible_to_read_committed(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=2)
    prod = clients.txn_produce(kafka.bootstrap(), topic_name, 400, 8, abort_every=2, key_prefix="ab-")
    assert prod["ok"], prod
    assert (prod["records_committed"], prod["records_aborted"]) == (200, 200)
    assert (prod["transactions_committed"], prod["transactions_aborted"]) == (4, 4)

    committed = clients.read_committed(kafka.bootstrap(), topic_name, 200, linger_ms=2000)
    assert committed["ok"], committed
    assert committed["count"] == 200  # lingering 2 s after 200 found nothing more

    everything = clients.read_committed(kafka.bootstrap(), topic_name, 400, isolation="read_uncommitted")
    assert everything["ok"], everything
    assert everything["count"] == 400


@pytest.mark.sasl
@pytest.mark.parametrize("produce_mech,consume_mech", [("SCRAM-SHA-256", "PLAIN"), ("PLAIN", "SCRAM-SHA-256")])
def test_java_transactions_over_sasl(kafka, topic_name, produce_mech, consume_mech):
    kafka.create_topic(topic_name, partitions=2)
    sasl = kafka.bootstrap("SASL_PLAINTEXT")
    prod = clients.txn_produce(sasl, topic_name, 100, 2, *clients.sasl_args(produce_mech))
    assert prod["ok"], prod
    assert prod["records_committed"] == 100
    cons = clients.read_committed(sasl, topic_name, 100, *clients.sasl_args(consume_mech))
    assert cons["ok"], cons
    assert (cons["count"], cons["duplicates"]) == (100, 0)


@pytest.mark.sasl
def test_sasl_rejects_a_wrong_password(kafka, topic_name):
    args = ["--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "bob", "--sasl-password", "not-bobs"]
    prod = clients.txn_produce(kafka.bootstrap("SASL_PLAINTEXT"), topic_name, 10, 1, *args, timeout_ms=20000)
    assert not prod["ok"]
    assert prod["_rc"] != 0
    assert "Authentication" in (prod["error"] or ""), prod["error"]
    assert prod["records_committed"] == 0
