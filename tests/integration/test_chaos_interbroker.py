"""Chaos scenario 15 (docs/faults.md): faults between the transaction coordinator and the partition
leader. The broker's INTERNAL (inter-broker) listener advertises a kproxy port, so the
coordinator's WriteTxnMarkers requests reach the leader through kproxy, where a rule answers
some of them with a retriable error.

Kafka's TransactionMarkerChannelManager sends the markers to the partition leader's endpoint for
`inter.broker.listener.name`, over the network even when the leader is the coordinator itself
(single node here), and TransactionMarkerRequestCompletionHandler re-queues a partition whose
marker failed with NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_
APPEND), REQUEST_TIMED_OUT or KAFKA_STORAGE_ERROR. The client cannot see any of this except as
a delay: read_committed consumers see the transaction once its markers are written.

The module has its own single-node broker (the session `kafka` fixture advertises its real
INTERNAL address) and one kproxy in front of that broker's INTERNAL port.
"""

import pytest

import clients
import kafka_harness as kh
from test_chaos_support import ChaosKproxy


@pytest.fixture(scope="module")
def interbroker():
    """(cluster, kproxy): a broker whose inter-broker traffic goes through kproxy."""
    proxy_port = kh.free_ports(1)[0]
    cluster = kh.KafkaCluster(1, name="interbroker", internal_advertise={1: ("127.0.0.1", proxy_port)})
    kp = None
    try:
        cluster.start(timeout=90)
        # Listens on the port the broker advertises for INTERNAL, forwards to the real one.
        kp = ChaosKproxy(cluster.node(1).address("INTERNAL"), name="interbroker", port=proxy_port).start()
        yield cluster, kp
    finally:
        if kp is not None:
            kp.__exit__(None, None, None)
        cluster.stop()


def test_scenario_15_write_txn_markers_retried_through_kproxy(interbroker):
    cluster, kp = interbroker
    topic = "s15-markers"
    cluster.create_topic(topic, partitions=2)
    rule = kp.put_rule("markers-not-leader", {
        "match": {"api": "WriteTxnMarkers", "topic": topic},
        "action": {"answer": "NOT_LEADER_OR_FOLLOWER"},
        "trigger": {"times": 3},
    })
    assert rule["injected"] == 0
    # The client talks to the broker directly: only the broker's own traffic goes through kproxy.
    prod = clients.txn_produce(cluster.bootstrap(), topic, records=60, transactions=2, key_prefix="s15-")
    assert prod["ok"], prod.get("error")
    assert prod["records_committed"] == 60
    cons = clients.read_committed(cluster.bootstrap(), topic, expect=60, timeout_ms=30000)
    assert (cons["count"], cons["duplicates"], cons["content_mismatches"]) == (60, 0, 0), cons
    counts = kp.rule("markers-not-leader")
    # Three WriteTxnMarkers for the topic were refused, then the coordinator retried: at least the
    # two transactions' successful marker requests matched the rule too (hits > injected).
    assert counts["injected"] == 3, counts
    assert counts["hits"] >= 3 + 2, counts
    assert kp.metric("kproxy_faults_injected_total", rule="markers-not-leader") == 3
    assert kp.stop() == 0
