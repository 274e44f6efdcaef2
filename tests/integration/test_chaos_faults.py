"""Chaos (issue #5): fault rules and ApiVersions rewriting in front of a real Kafka 4.4.0 broker,
with real transactional clients (Java kafka-clients 4.4 and librdkafka). Each test asserts what
the client observably does: success after retries (the rule's injections counted from kproxy's
log), the exception class of a fatal error, and what a read_committed consumer reads.

Rules come from the config's `faults:` section here; kproxy logs each injection at debug level as
"fault rule '<name>' injects <action> on <Api> v<version>", which is what the tests count.
"""

import re
import uuid

import pytest

import clients
from test_proxy_support import Kproxy, fault_rule


def _injections(kp: Kproxy, rule: str):
    """[(action, api, version)] of every injection of `rule` so far."""
    rx = re.compile(r"fault rule '" + re.escape(rule) + r"' injects (\w+) on (\w+) v(\d+)")
    return [(m.group(1), m.group(2), int(m.group(3))) for m in rx.finditer(kp.log_text())]


def _faults_yaml(*rules: str) -> str:
    return "faults:\n" + "".join(rules)


def test_scenarios_1_and_3_coordinator_moved_and_concurrent_txns_are_retried(kafka, topic_name):
    """NOT_COORDINATOR on InitProducerId, CONCURRENT_TRANSACTIONS twice on EndTxn: the Java
    producer re-discovers / retries; every record is committed exactly once."""
    kafka.create_topic(topic_name, partitions=2)
    rules = _faults_yaml(
        fault_rule("init-not-coordinator", "api: InitProducerId", "answer: NOT_COORDINATOR", "{ times: 1 }"),
        fault_rule("endtxn-concurrent", "api: EndTxn", "answer: CONCURRENT_TRANSACTIONS", "{ times: 2 }"))
    with Kproxy(kafka.bootstrap(), name="chaos13", extra_yaml=rules) as kp:
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=300, transactions=3, key_prefix="s13-")
        assert prod["ok"], prod.get("error")
        assert prod["records_committed"] == 300
        assert [a for a, _api, _v in _injections(kp, "init-not-coordinator")] == ["answer"]
        assert len(_injections(kp, "endtxn-concurrent")) == 2
        cons = clients.read_committed(kp.bootstrap, topic_name, expect=300)
        assert (cons["count"], cons["duplicates"], cons["content_mismatches"]) == (300, 0, 0), cons
        assert kp.stop() == 0


def test_scenario_4_fenced_producer_is_fatal_and_its_txn_never_visible(kafka, topic_name):
    """PRODUCER_FENCED answered on EndTxn (the broker never commits): the Java producer fails
    with ProducerFencedException; nothing of that transaction is ever read_committed."""
    kafka.create_topic(topic_name, partitions=1)
    txn_id = f"chaos-fenced-{uuid.uuid4().hex[:8]}"
    rules = _faults_yaml(
        fault_rule("fence", "api: EndTxn", "answer: PRODUCER_FENCED", "once"))
    with Kproxy(kafka.bootstrap(), name="chaos4", extra_yaml=rules) as kp:
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=50, transactions=1, key_prefix="fenced-", transactional_id=txn_id)
        assert not prod["ok"]
        assert "ProducerFencedException" in prod["error"], prod
        assert len(_injections(kp, "fence")) == 1
        # The next producer with the same transactional.id aborts the open transaction.
        after = clients.txn_produce(kp.bootstrap, topic_name, records=20, transactions=1, key_prefix="after-", transactional_id=txn_id)
        assert after["ok"], after
        cons = clients.read_committed(kp.bootstrap, topic_name, expect=20)
        assert (cons["count"], cons["duplicates"]) == (20, 0), cons
        assert kp.stop() == 0


def test_scenario_6_transaction_abortable_on_produce_then_continue(kafka, topic_name):
    """TRANSACTION_ABORTABLE on Produce (sent as-is to v11+, INVALID_TXN_STATE below): the Java
    producer aborts; the application can carry on with the same transactional.id."""
    kafka.create_topic(topic_name, partitions=1)
    rules = _faults_yaml(
        fault_rule("abortable", "api: Produce", "answer: TRANSACTION_ABORTABLE", "once"))
    with Kproxy(kafka.bootstrap(), name="chaos6", extra_yaml=rules) as kp:
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=10, transactions=1, key_prefix="ab-", timeout_ms=20000)
        assert not prod["ok"]
        assert "TransactionAbortable" in prod["error"] or "InvalidTxnState" in prod["error"], prod
        assert len(_injections(kp, "abortable")) == 1
        again = clients.txn_produce(kp.bootstrap, topic_name, records=10, transactions=1, key_prefix="ok-",
                                    transactional_id=prod["transactional_id"])
        assert again["ok"], again
        assert kp.stop() == 0


def test_scenario_13_produce_capped_to_v9(kafka, topic_name):
    """api_versions caps Produce at v9: the client negotiates down and only sends <= v9.

    An idempotent (not transactional) producer: a Java 4.4 *transactional* producer keeps using
    transaction.version 2 (from the finalized features) with Produce v9 and the broker rejects its
    writes ("Partition was not added to the transaction"); a real TV1 downgrade also needs the
    FinalizedFeatures rewritten, which kproxy does not do yet."""
    kafka.create_topic(topic_name, partitions=1)
    extra = ("api_versions:\n  - { api: Produce, max: 9 }\n" +
             _faults_yaml(fault_rule("produce-seen", "api: Produce", "delay: 0")))
    with Kproxy(kafka.bootstrap(), name="chaos13v", extra_yaml=extra) as kp:
        prod = clients.rd_produce(kp.bootstrap, topic_name, 100, key_prefix="v9-")
        assert prod["errors"] == [] and prod["delivered"] == 100, prod
        seen = _injections(kp, "produce-seen")
        assert seen, "no Produce went through kproxy"
        assert max(v for _a, _api, v in seen) <= 9, seen
        assert kp.stop() == 0


def test_librdkafka_scenario_3_concurrent_transactions_retried(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    rules = _faults_yaml(
        fault_rule("rd-endtxn-concurrent", "api: EndTxn", "answer: CONCURRENT_TRANSACTIONS", "{ times: 2 }"))
    with Kproxy(kafka.bootstrap(), name="chaosrd3", extra_yaml=rules) as kp:
        out = clients.rd_txn_produce(kp.bootstrap, topic_name, 60, 2, key_prefix="rd3-")
        assert out["errors"] == []
        assert out["records_committed"] == 60
        assert len(_injections(kp, "rd-endtxn-concurrent")) == 2
        cons = clients.rd_consume(kp.bootstrap, topic_name, 60, key_prefix="rd3-")
        assert (cons["count"], cons["duplicates"]) == (60, 0), cons
        assert kp.stop() == 0


def test_librdkafka_scenario_4_fenced_is_fatal(kafka, topic_name):
    import confluent_kafka
    kafka.create_topic(topic_name, partitions=1)
    rules = _faults_yaml(
        fault_rule("rd-fence", "api: EndTxn", "answer: PRODUCER_FENCED", "once"))
    with Kproxy(kafka.bootstrap(), name="chaosrd4", extra_yaml=rules) as kp:
        with pytest.raises(confluent_kafka.KafkaException) as info:
            clients.rd_txn_produce(kp.bootstrap, topic_name, 10, 1, key_prefix="rd4-", timeout=30)
        err = info.value.args[0]
        assert err.fatal() or err.code() in (confluent_kafka.KafkaError._FENCED, confluent_kafka.KafkaError.PRODUCER_FENCED), err
        assert len(_injections(kp, "rd-fence")) == 1
        assert kp.stop() == 0


def test_bad_fault_rule_is_refused_at_start_with_file_and_line(tmp_path):
    rules = _faults_yaml(
        "  - name: bad\n"
        "    match: { api: EndTxnn }\n"
        "    action: { error: NOT_COORDINATOR }\n")
    kp = Kproxy("127.0.0.1:1", name="chaosbad", extra_yaml=rules)
    with pytest.raises(RuntimeError) as info:
        kp.start(timeout=10)
    assert re.search(r"kproxy\.yaml:\d+:\d+: faults\[0\]\.match\.api: unknown API 'EndTxnn'", str(info.value)), str(info.value)


def _describe_txn(bootstrap: str, txn_id: str):
    return clients.run_java("ChaosDescribeTxn", ["--bootstrap", bootstrap, "--transactional-id", txn_id, "--timeout-ms", 20000], timeout=90)


def test_scenario_16_describe_transactions_retries_load_in_progress_and_fails_clearly(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    txn_id = f"chaos-describe-{uuid.uuid4().hex[:8]}"
    rules = _faults_yaml(
        fault_rule("describe-loading", f"api: DescribeTransactions, transactional_id: \"{txn_id}\"",
                   "answer: COORDINATOR_LOAD_IN_PROGRESS", "{ times: 2 }"),
        fault_rule("describe-not-found", "api: DescribeTransactions, transactional_id: \"missing-*\"",
                   "answer: TRANSACTIONAL_ID_NOT_FOUND"))
    with Kproxy(kafka.bootstrap(), name="chaos16", extra_yaml=rules) as kp:
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=5, transactions=1, transactional_id=txn_id)
        assert prod["ok"], prod.get("error")
        found = _describe_txn(kp.bootstrap, txn_id)
        assert found["ok"], found
        assert len(_injections(kp, "describe-loading")) == 2
        missing = _describe_txn(kp.bootstrap, "missing-" + txn_id)
        assert not missing["ok"]
        assert missing["error_class"].endswith("TransactionalIdNotFoundException"), missing
        assert kp.stop() == 0


def test_scenario_13_hidden_describe_transactions_is_unsupported(kafka):
    extra = "api_versions:\n  - { api: DescribeTransactions, hide: true }\n"
    with Kproxy(kafka.bootstrap(), name="chaos13h", extra_yaml=extra) as kp:
        out = _describe_txn(kp.bootstrap, "anything")
        assert not out["ok"]
        assert out["error_class"].endswith("UnsupportedVersionException"), out
        assert kp.stop() == 0


def test_scenario_10_endtxn_response_dropped_once(kafka, topic_name):
    """The broker commits but its EndTxn answer is blackholed: the Java producer times the request
    out, reconnects and retries EndTxn; it reports success only once the retry is answered, and
    the records are committed exactly once."""
    kafka.create_topic(topic_name, partitions=1)
    rules = _faults_yaml(
        fault_rule("drop-endtxn", "api: EndTxn", "drop_response: true", "once"))
    with Kproxy(kafka.bootstrap(), name="chaos10", extra_yaml=rules) as kp:
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=40, transactions=2, key_prefix="s10-",
                                   property="request.timeout.ms=3000")
        assert prod["ok"], prod.get("error")
        assert prod["records_committed"] == 40
        assert len(_injections(kp, "drop-endtxn")) == 1
        assert prod["elapsed_ms"] >= 3000  # success was not reported before the retry was answered
        cons = clients.read_committed(kp.bootstrap, topic_name, expect=40)
        assert (cons["count"], cons["duplicates"]) == (40, 0), cons
        assert kp.stop() == 0


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
def test_duplicate_request_reaches_the_broker_twice_and_only_idempotence_hides_it(kafka, topic_name, idempotent):
    """duplicate_request (docs/faults.md): every Produce is sent to the broker twice, as a retry
    after a lost answer would be. An idempotent producer's duplicate batch is acknowledged and not
    appended again (KIP-98): 0 duplicates. Without idempotence the broker appends both copies, so
    the same rule shows the duplicates a client without idempotence would make on a retry."""
    kafka.create_topic(topic_name, partitions=1)
    rules = _faults_yaml(fault_rule("twice", "api: Produce", "duplicate_request: true"))
    prefix = f"dup-{'i' if idempotent else 'p'}-"
    conf = {"linger.ms": 20} if idempotent else {"enable.idempotence": False, "acks": "all", "linger.ms": 20,
                                                   "max.in.flight.requests.per.connection": 1}
    with Kproxy(kafka.bootstrap(), name=f"dup{'i' if idempotent else 'p'}", extra_yaml=rules, log_level="debug") as kp:
        out = clients.rd_produce(kp.bootstrap, topic_name, 200, key_prefix=prefix, conf=conf)
        assert out["errors"] == [] and out["delivered"] == 200, out
        injected = _injections(kp, "twice")
        assert injected and all(a == "duplicate_request" and api == "Produce" for a, api, _ in injected), injected
        assert kp.stop() == 0
    cons = clients.rd_consume(kafka.bootstrap(), topic_name, 200 if idempotent else 400, key_prefix=prefix,
                              isolation="read_uncommitted")
    if idempotent:
        assert (cons["count"], cons["duplicates"]) == (200, 0), cons
    else:
        # Every Produce was duplicated and appended twice: every record is in the log twice.
        assert (cons["count"], cons["duplicates"]) == (400, 200), cons
