"""(b) Transactions against a real 3-node KRaft cluster, partitions led by different brokers."""

import pytest

import clients
import kafka_harness as kh

pytestmark = pytest.mark.cluster


def test_every_node_sees_the_whole_cluster(kafka_cluster):
    ids = {n.node_id for n in kafka_cluster.nodes}
    assert len(ids) == 3
    for n in kafka_cluster.nodes:
        md = kafka_cluster.metadata(node_id=n.node_id)
        assert set(md.brokers) == ids
        assert md.cluster_id == kafka_cluster.cluster_id
        for b in kafka_cluster.nodes:
            assert md.brokers[b.node_id] == ("127.0.0.1", b.ports["PLAINTEXT"])
        # KRaft brokers report some live broker as "controller" (clients cannot reach the
        # real KRaft controller), so only membership is guaranteed.
        assert md.controller_id in ids


def test_java_transactions_across_three_leaders(kafka_cluster, topic_name):
    ids = sorted(n.node_id for n in kafka_cluster.nodes)
    # 6 partitions, replication factor 3, leaders rotated over the 3 brokers.
    assignments = {p: ids[p % 3:] + ids[:p % 3] for p in range(6)}
    topic = kafka_cluster.create_topic(topic_name, assignments=assignments)
    leaders = {p: m.leader for p, m in topic.partitions.items()}
    assert leaders == {p: assignments[p][0] for p in range(6)}
    assert set(leaders.values()) == set(ids), "partitions must be led by all three brokers"
    for m in topic.partitions.values():
        assert sorted(m.replicas) == ids

    # librdkafka's view of the leaders agrees with the raw Metadata probe.
    assert clients.rd_partition_leaders(kafka_cluster.bootstrap(), topic_name) == leaders

    # Bootstrap through one node only: the clients must discover and use the other leaders.
    first = kafka_cluster.nodes[0].address()
    prod = clients.txn_produce(first, topic_name, 1000, 10)
    assert prod["ok"], prod
    assert (prod["records_committed"], prod["transactions_committed"]) == (1000, 10)
    assert set(prod["partitions"]) == {str(p) for p in range(6)}

    cons = clients.read_committed(first, topic_name, 1000)
    assert cons["ok"], cons
    assert (cons["count"], cons["unique_keys"], cons["duplicates"]) == (1000, 1000, 0)
    assert cons["content_mismatches"] == 0
    assert cons["partitions"] == prod["partitions"]

    # Every leader took writes.
    per_leader = {}
    for p, n in prod["partitions"].items():
        per_leader[leaders[int(p)]] = per_leader.get(leaders[int(p)], 0) + n
    assert set(per_leader) == set(ids) and all(v > 0 for v in per_leader.values())


def test_consumer_group_read_committed_on_cluster(kafka_cluster, topic_name):
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    prod = clients.txn_produce(kafka_cluster.bootstrap(), topic_name, 300, 3, abort_every=3, key_prefix="g-")
    assert prod["ok"], prod
    assert prod["records_committed"] == 200
    cons = clients.read_committed(kafka_cluster.bootstrap(), topic_name, 200, group=f"{topic_name}-grp")
    assert cons["ok"], cons
    assert (cons["count"], cons["duplicates"]) == (200, 0)
