"""One kproxy in front of a real 3-node Kafka 4.4.0 cluster (issue #4, items 2 and 3).

How "the client never reaches a broker directly" is shown: the brokers listen on and advertise
their real loopback ports, which a test process could reach, so reachability itself cannot be
taken away without network namespaces. Instead the tests check what the client is *told*: every
address in every broker-naming response (Metadata, DescribeCluster, FindCoordinator for groups
and transactions) is a kproxy port and none is a real broker port; and kproxy's log shows that
the clients connected through the per-broker port of every node. kproxy itself reaches the
brokers at the addresses they advertise, as a deployed proxy would.
"""

import clients
import kafka_harness as kh
from test_proxy_support import Kproxy, describe_cluster, find_coordinator


def _assert_only_kproxy_addresses(kp, cluster, topic, group=None, transactional_id=None):
    real = {n.ports[name] for n in cluster.nodes for name in n.ports}
    nodes = sorted(n.node_id for n in cluster.nodes)
    md = kh.metadata("127.0.0.1", kp.port, [topic])
    assert sorted(md.brokers) == nodes
    for node, (host, port) in md.brokers.items():
        assert host == "127.0.0.1" and port not in real
        if not kp.port_range:
            assert port == kp.broker_port(node)
    kproxy_ports = {port for (_h, port) in md.brokers.values()}
    assert {(b, h, p) for b, h, p in describe_cluster("127.0.0.1", kp.port)} == {(b, h, p) for b, (h, p) in md.brokers.items()}
    for key, key_type in ((group, 0), (transactional_id, 1)):
        if key is None:
            continue
        for node, host, port, err in find_coordinator("127.0.0.1", kp.port, key, key_type):
            assert err == 0 and host == "127.0.0.1" and port in kproxy_ports
    return md


def test_transactions_10000_records_in_100_txns_exactly_once(kafka_cluster, topic_name):
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    with Kproxy(kafka_cluster.bootstrap(), name="cluster-txn", workers=2) as kp:
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=10000, transactions=100, timeout=300)
        assert prod["ok"], prod
        assert (prod["records_committed"], prod["transactions_committed"]) == (10000, 100)
        group = f"g-{topic_name}"
        cons = clients.read_committed(kp.bootstrap, topic_name, expect=10000, group=group, timeout_ms=120000)
        assert cons["ok"], cons
        assert (cons["count"], cons["unique_keys"], cons["duplicates"], cons["content_mismatches"]) == (10000, 10000, 0, 0)
        md = _assert_only_kproxy_addresses(kp, kafka_cluster, topic_name, group=group, transactional_id=prod["transactional_id"])
        # Partition leaders spread over the nodes, so the clients used several per-broker ports.
        leaders = {p.leader for p in md.topics[topic_name].partitions.values()}
        log = kp.log_text()
        for node in leaders:
            assert f"on cluster-txn/node-{node} port {kp.broker_port(node)}" in log
        assert "mismatch" not in log and "cannot rewrite" not in log
        assert kp.stop() == 0


def test_ports_assigned_in_order_of_discovery(kafka_cluster, topic_name):
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3)
    with Kproxy(kafka_cluster.bootstrap(), name="cluster-range", port_range=True) as kp:
        prod = clients.rd_produce(kp.bootstrap, topic_name, 600)
        assert prod["errors"] == [] and prod["delivered"] == 600
        cons = clients.rd_consume(kp.bootstrap, topic_name, 600, key_prefix="rd-")
        assert (cons["count"], cons["duplicates"]) == (600, 0)
        md = _assert_only_kproxy_addresses(kp, kafka_cluster, topic_name)
        # Three nodes, three consecutive ports from the start of the range.
        assert sorted(p for (_h, p) in md.brokers.values()) == [kp.base, kp.base + 1, kp.base + 2]
        assert kp.stop() == 0


def test_java_clients_through_kproxy_on_the_cluster(kafka_cluster, topic_name):
    kafka_cluster.create_topic(topic_name, partitions=6, replication_factor=2)
    with Kproxy(kafka_cluster.bootstrap(), name="cluster-java", workers=1) as kp:
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=3000, transactions=30, abort_every=3)
        assert prod["ok"], prod
        cons = clients.read_committed(kp.bootstrap, topic_name, expect=prod["records_committed"])
        assert cons["ok"], cons
        assert (cons["count"], cons["duplicates"]) == (prod["records_committed"], 0)
        _assert_only_kproxy_addresses(kp, kafka_cluster, topic_name, transactional_id=prod["transactional_id"])
        assert kp.stop() == 0
