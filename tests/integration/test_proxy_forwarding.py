"""kproxy in front of one real Kafka 4.4.0 broker: Java and librdkafka clients work through it,
and every broker address a client can learn is a kproxy address (issue #4, items 1, 4, 5, 6)."""

import socket
import struct
import time

import clients
import kafka_harness as kh
from test_chaos_support import ChaosKproxy
from test_proxy_support import Kproxy, connection_closed, describe_cluster, find_coordinator, recv_frame, request


def _real_ports(kafka):
    return {n.ports[listener] for n in kafka.nodes for listener in n.ports}


def test_java_txn_producer_and_consumer_see_only_kproxy_addresses(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=3)
    with Kproxy(kafka.bootstrap(), name="java") as kp:
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=2000, transactions=20)
        assert prod["ok"], prod
        assert prod["records_committed"] == 2000
        cons = clients.read_committed(kp.bootstrap, topic_name, expect=2000)
        assert cons["ok"], cons
        assert (cons["count"], cons["duplicates"], cons["content_mismatches"]) == (2000, 0, 0)

        # Every address a client can be told: Metadata, DescribeCluster, FindCoordinator.
        md = kh.metadata("127.0.0.1", kp.port, [topic_name])
        assert md.brokers == {n.node_id: ("127.0.0.1", kp.broker_port(n.node_id)) for n in kafka.nodes}
        assert {p for (_h, p) in md.brokers.values()}.isdisjoint(_real_ports(kafka))
        assert describe_cluster("127.0.0.1", kp.port) == [(n.node_id, "127.0.0.1", kp.broker_port(n.node_id)) for n in kafka.nodes]
        for node, host, port, err in find_coordinator("127.0.0.1", kp.port, prod["transactional_id"], key_type=1):
            assert err == 0
            assert (host, port) == ("127.0.0.1", kp.broker_port(node))

        # The clients really went through the per-broker port.
        log = kp.log_text()
        assert f"on java/node-1 port {kp.broker_port(1)}" in log
        assert "mismatch" not in log
        assert kp.stop() == 0


def test_librdkafka_produce_consume_and_transactions(kafka, topic_name):
    kafka.create_topic(topic_name, partitions=3)
    with Kproxy(kafka.bootstrap(), name="rdkafka") as kp:
        prod = clients.rd_produce(kp.bootstrap, topic_name, 500)
        assert prod["errors"] == [] and prod["delivered"] == 500
        cons = clients.rd_consume(kp.bootstrap, topic_name, 500, key_prefix="rd-")
        assert cons["errors"] == []
        assert (cons["count"], cons["duplicates"], cons["content_mismatches"]) == (500, 0, 0)
        txn = clients.rd_txn_produce(kp.bootstrap, topic_name + "-tx", 300, 6, abort_every=3)
        assert txn["errors"] == []
        assert (txn["records_committed"], txn["records_aborted"]) == (200, 100)
        leaders = clients.rd_partition_leaders(kp.bootstrap, topic_name)
        assert set(leaders.values()) <= {kp.broker_port(n.node_id) for n in kafka.nodes} | {n.node_id for n in kafka.nodes}
        assert kp.stop() == 0


def test_produce_acks0_gets_no_inflight_entry(kafka, topic_name):
    """acks=0: the broker sends no response, so kproxy must not wait for one (docs/protocol.md "Produce acks=0").
    A wrong FIFO entry would make the next response look mismatched and close the connection."""
    kafka.create_topic(topic_name, partitions=1)
    with Kproxy(kafka.bootstrap(), name="acks0") as kp:
        import confluent_kafka
        errors = []
        producer = confluent_kafka.Producer({"bootstrap.servers": kp.bootstrap, "acks": 0, "enable.idempotence": False,
                                             "linger.ms": 5})
        for i in range(300):
            producer.produce(topic_name, key=f"zero-{i}", value=f"v{i}",
                             on_delivery=lambda err, _msg: err is not None and errors.append(str(err)))
            if i % 50 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
        assert errors == []
        cons = clients.rd_consume(kp.bootstrap, topic_name, 300, key_prefix="zero-")
        assert cons["count"] == 300, cons
        log = kp.log_text()
        assert "mismatch" not in log and "no request in flight" not in log
        assert kp.stop() == 0


def test_pipelined_requests_are_answered_in_order(kafka):
    """50 requests written back to back in one segment; 50 responses come back in order, each
    with its own correlation id, and Metadata responses name only kproxy ports."""
    with Kproxy(kafka.bootstrap(), name="pipeline", workers=1) as kp:
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            batch = b""
            expected = []
            for i in range(50):
                cid = 0x7FFFFF00 + i if i % 3 else -1000 - i  # ids near INT32_MAX and negative ones
                if i % 2:
                    batch += request(3, 4, cid, struct.pack(">i", -1) + b"\x00")  # Metadata v4: all topics
                else:
                    batch += request(18, 0, cid, b"")  # ApiVersions v0
                expected.append((cid, i % 2))
            s.sendall(batch)
            for cid, is_metadata in expected:
                payload = recv_frame(s)
                assert struct.unpack(">i", payload[:4])[0] == cid
                if is_metadata:
                    r = kh._Buf(payload[4:])
                    r.int32()  # throttle
                    brokers = r.array(lambda b: (b.int32(), b.string(), b.int32(), b.string()))
                    assert [(n, h, p) for n, h, p, _ in brokers] == [(n.node_id, "127.0.0.1", kp.broker_port(n.node_id)) for n in kafka.nodes]
        assert kp.stop() == 0


def test_unknown_api_key_is_forwarded_untouched(kafka):
    """A vendor API key (> 10000) is not kproxy's to judge: it is forwarded and the broker
    decides (Kafka closes the connection); kproxy counts it and keeps serving others."""
    with Kproxy(kafka.bootstrap(), name="unknown") as kp:
        with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
            s.sendall(request(10001, 0, 5, b"vendor body"))
            assert connection_closed(s, 10)
        kp.wait_for_log(r"forwarding api key 10001 \(unknown-api\) v0 untouched")
        kp.wait_for_log(r"broker 127\.0\.0\.1:\d+ closed the connection")
        assert kh.metadata("127.0.0.1", kp.port).brokers
        assert kp.stop() == 0


def test_large_records_cross_intact_both_ways(kafka, topic_name):
    """Produce requests of ~1 MB and Fetch responses of several MB are split over many TCP reads:
    kproxy reads the rest of such a frame straight into its own buffer and moves that buffer to
    the other side's write queue (codec/frame_reader.h, proxy/net/tcp_stream.h); a large request
    whose API no fault rule names is sent on while it arrives (cut-through). Every byte must
    arrive where it was sent, in order, with nothing lost or duplicated."""
    import hashlib
    import random
    import confluent_kafka

    kafka.create_topic(topic_name, partitions=3)
    count, size = 24, 700 * 1024

    def value(i: int) -> bytes:
        return random.Random(i).randbytes(size)

    with ChaosKproxy(kafka.bootstrap(), name="large", workers=1) as kp:
        errors = []
        producer = confluent_kafka.Producer({"bootstrap.servers": kp.bootstrap, "acks": "all", "linger.ms": 20,
                                             "compression.type": "none", "batch.size": 1000000,
                                             "message.max.bytes": 1000000})
        for i in range(count):
            producer.produce(topic_name, key=f"big-{i}", value=value(i), partition=i % 3,
                             on_delivery=lambda err, _msg: err is not None and errors.append(str(err)))
            producer.poll(0)
        assert producer.flush(60) == 0
        assert errors == []

        # Fetch responses carry up to 1 MiB per partition, three partitions: frames of ~2-3 MB.
        consumer = confluent_kafka.Consumer({"bootstrap.servers": kp.bootstrap, "group.id": f"large-{topic_name}",
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                             "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 1 << 20})
        seen = {}
        try:
            consumer.subscribe([topic_name])
            deadline = time.monotonic() + 60
            while len(seen) < count and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                seen[msg.key().decode()] = hashlib.sha256(msg.value()).hexdigest()
        finally:
            consumer.close()
        expected = {f"big-{i}": hashlib.sha256(value(i)).hexdigest() for i in range(count)}
        assert seen == expected
        # Produce requests this large were forwarded while they arrived (cut-through,
        # ClientConnection::stream_large_request): their start left before their end came in.
        assert kp.metric("kproxy_proxy_requests_streamed_total") >= 1
        log = kp.log_text()
        assert "mismatch" not in log and "framing" not in log
        assert kp.stop() == 0
