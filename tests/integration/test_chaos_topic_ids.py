"""`topic:` globs on requests that name topics by id (KIP-516): the Java 4.4 producer sends
Produce v13 to a 4.4 broker, with TopicId instead of the topic name. kproxy learns id -> name from
the Metadata responses it forwards (proxy/cluster/topic_names.h), so a rule for the topic name
still matches, and its `error` action sets the code of that topic's entries in the v13 response
(which names the topic by id too)."""

import re

import clients
from test_chaos_support import ChaosKproxy


def test_produce_v13_topic_glob_matches_by_learned_topic_id(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    with ChaosKproxy(kafka.bootstrap(), name="topicids") as kp:
        kp.put_rule("by-name", {"match": {"api": "Produce", "versions": "13-", "topic": topic_name},
                                "action": {"error": "NOT_ENOUGH_REPLICAS"}, "trigger": {"times": 2}})
        kp.put_rule("other-topic", {"match": {"api": "Produce", "topic": "not-" + topic_name},
                                    "action": {"error": "NOT_ENOUGH_REPLICAS"}})
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=30, transactions=1, key_prefix="tid-")
        assert prod["ok"], prod.get("error")
        versions = {int(v) for v in re.findall(r"injects error on Produce v(\d+)", kp.log_text())}
        assert versions == {13}, versions  # the client really named the topic by id
        by_name, other = kp.rule("by-name"), kp.rule("other-topic")
        # Two Produce v13 answers said NOT_ENOUGH_REPLICAS for the topic: the producer retried.
        assert by_name["injected"] == 2 and by_name["hits"] >= 3, by_name
        assert other["hits"] == 0, other
        cons = clients.read_committed(kp.bootstrap, topic_name, expect=30)
        assert (cons["count"], cons["duplicates"], cons["content_mismatches"]) == (30, 0, 0), cons
        assert kp.stop() == 0
