"""Example: a producer survives two NOT_LEADER_OR_FOLLOWER answers that kproxy injects."""

import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def test_producer_retries_injected_not_leader(kproxy):
    topic = f"example-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kproxy.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

    # The broker's next two Produce answers for this topic carry NOT_LEADER_OR_FOLLOWER.
    kproxy.put_rule("not-leader", {"match": {"api": "Produce", "topic": topic},
                                   "action": {"error": "NOT_LEADER_OR_FOLLOWER"},
                                   "trigger": {"times": 2}})

    producer = confluent_kafka.Producer({"bootstrap.servers": kproxy.bootstrap, "enable.idempotence": True,
                                         "retry.backoff.ms": 50})
    delivered = []
    for i in range(10):
        producer.produce(topic, value=b"v%d" % i, on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(30)
    assert delivered == [None] * 10          # every record delivered despite the faults
    assert kproxy.rule("not-leader")["injected"] == 2
