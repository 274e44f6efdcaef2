"""kproxy's Toxiproxy API in front of a real Kafka 4.4 broker (issue #34, docs/toxiproxy.md
"Status"), driven by toxiproxy-python: the proxy's upstream is probed with an ApiVersions request
when the proxy is created, GET /proxies says it found Kafka and why, and a Kafka request passes
through the proxy with a measured latency toxic. A Kafka proxy is a kproxy listener ("relay":
"kafka"; test_toxiproxy_kafka_aware.py tests what that changes)."""

from __future__ import annotations

import time

import kafka_harness as kh
import slowness
from test_proxy_support import Kproxy
from test_toxiproxy_tcp import _client


def test_python_client_proxy_to_a_kafka_broker_is_detected_as_kafka(kafka):
    toxiproxy, consumer = _client()
    broker = kafka.bootstrap().split(",")[0]
    with Kproxy(broker, name="toxik", extra_yaml="toxiproxy: { listen: 127.0.0.1:0 }\n") as kp:
        host, port = kp.wait_bound("toxiproxy", "api").rsplit(":", 1)
        server = toxiproxy.Toxiproxy()
        server.update_api_consumer(host, int(port))
        proxy = server.create(upstream=broker, name="kafka", listen="127.0.0.1:0")
        shown = consumer.get("/proxies/kafka").json()
        assert shown["kafka"] is True, shown
        assert shown["kafka_reason"] == "the upstream answered an ApiVersions request"
        assert shown["relay"] == "kafka"

        relay_port = int(proxy.listen.rsplit(":", 1)[1])
        direct = kh.metadata("127.0.0.1", relay_port, timeout=slowness.scaled(10))
        assert sorted(direct.brokers) == sorted(n.node_id for n in kafka.nodes)

        proxy.add_toxic(type="latency", attributes={"latency": 300})
        t0 = time.monotonic()
        slowed = kh.metadata("127.0.0.1", relay_port, timeout=slowness.scaled(10))
        assert time.monotonic() - t0 >= 0.29
        assert sorted(slowed.brokers) == sorted(direct.brokers)
        proxy.destroy_toxic("latency_downstream")

        # The override: a proxy declared not Kafka is not probed.
        consumer.post("/proxies", json={"name": "declared", "upstream": broker, "listen": "127.0.0.1:0", "kafka": False})
        declared = consumer.get("/proxies/declared").json()
        assert declared["kafka"] is False and "kafka field" in declared["kafka_reason"], declared
