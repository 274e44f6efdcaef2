"""Kafka-aware Toxiproxy proxies (issue #34, docs/toxiproxy.md "Kafka-aware proxies") against the
real Kafka 4.4 broker, driven by toxiproxy-python: a proxy whose upstream answers ApiVersions
becomes a kproxy listener added at run time, so Metadata through it names only the proxy's own
address and a Java producer and consumer never reach the broker directly. Toxiproxy's latency,
bandwidth and reset_peer toxics and kproxy's kafka_error toxic act on that traffic (as fault rules
scoped to the proxy's listener); once they are removed the records come back exact.

Also kproxy's own admin API for the same run-time listeners: PUT /listeners/{name} with a body
like a `listeners:` entry (checked by the config loader's code: the same error texts) and DELETE.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.request

import clients
import kafka_harness as kh
import ports as port_pool
import pytest
import slowness
from test_proxy_support import Kproxy
from test_toxiproxy_tcp import _call, _client


def _ports_of(pid: int) -> list:
    """Remote ports of the established TCP connections of process `pid` (ss -tnp)."""
    out = subprocess.run(["ss", "-H", "-tnp", "state", "established"], capture_output=True, text=True, timeout=10).stdout
    ports = []
    for line in out.splitlines():
        if f"pid={pid}," not in line:
            continue
        fields = line.split()
        ports.append(int(fields[3].rsplit(":", 1)[1]))
    return ports


def _admin(kp: Kproxy, method: str, path: str, body=None):
    host_port = kp.wait_bound("admin", "api")
    req = urllib.request.Request(f"http://{host_port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw.strip() else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw.strip() else None


def test_a_kafka_aware_proxy_keeps_every_connection_and_its_toxics_act_on_kafka_traffic(kafka):
    toxiproxy, consumer_api = _client()
    broker = kafka.bootstrap().split(",")[0]
    broker_port = int(broker.rsplit(":", 1)[1])
    topic = f"toxk-{int(time.time() * 1000)}"
    kafka.create_topic(topic, partitions=2)
    extra = "toxiproxy: { listen: 127.0.0.1:0 }\nadmin: { listen: 127.0.0.1:0 }\n"
    with Kproxy(broker, name="toxk", extra_yaml=extra) as kp:
        host, port = kp.wait_bound("toxiproxy", "api").rsplit(":", 1)
        server = toxiproxy.Toxiproxy()
        server.update_api_consumer(host, int(port))
        proxy = server.create(upstream=broker, name="kafka", listen="127.0.0.1:0")
        shown = consumer_api.get("/proxies/kafka").json()
        assert shown["kafka"] is True and shown["relay"] == "kafka", shown
        proxy_port = int(proxy.listen.rsplit(":", 1)[1])
        assert proxy_port != broker_port

        # Metadata through the proxy names the proxy's own address, nothing else.
        meta = kh.metadata("127.0.0.1", proxy_port, timeout=slowness.scaled(10))
        assert list(meta.brokers.values()) == [("127.0.0.1", proxy_port)], meta.brokers
        status, listeners = _admin(kp, "GET", "/listeners")
        runtime = [l for l in listeners["listeners"] if l["name"] == "toxiproxy-kafka"]
        assert runtime and runtime[0]["runtime"] is True and runtime[0]["broker_ports"] == "listen", listeners

        bootstrap = f"127.0.0.1:{proxy_port}"
        # A consumer that waits for the records while a transactional producer writes them:
        # neither has a connection to the broker's own port.
        reader = clients.start_java("ReadCommittedConsumer", ["--bootstrap", bootstrap, "--topic", topic, "--expect", 200,
                                                              "--timeout-ms", 120000])
        produced = clients.txn_produce(bootstrap, topic, 200, 4, key_prefix="clean-")
        assert produced["ok"] and produced["records_committed"] == 200, produced
        seen_proxy = False
        deadline = time.monotonic() + slowness.scaled(60)
        while reader.proc.poll() is None and time.monotonic() < deadline:
            ports = _ports_of(reader.proc.pid)
            assert broker_port not in ports, f"the consumer reached the broker directly: {ports}"
            seen_proxy = seen_proxy or proxy_port in ports
            time.sleep(0.2)
        read = reader.result(timeout=slowness.scaled(120))
        assert read["count"] == 200 and read["duplicates"] == 0 and read["content_mismatches"] == 0, read
        assert seen_proxy or read["count"] == 200

        # latency: a Metadata round trip takes at least the toxic's 300 ms.
        proxy.add_toxic(type="latency", attributes={"latency": 300})
        t0 = time.monotonic()
        kh.metadata("127.0.0.1", proxy_port, timeout=slowness.scaled(10))
        slowed = time.monotonic() - t0
        assert slowed >= 0.29, slowed
        proxy.destroy_toxic("latency_downstream")
        t0 = time.monotonic()
        kh.metadata("127.0.0.1", proxy_port, timeout=slowness.scaled(10))
        assert time.monotonic() - t0 < slowed

        # bandwidth: a rate (KB/s, 1000 bytes each) that makes a Metadata answer for every topic
        # take about 2 s; unshaped it takes a few ms.
        for i in range(6):  # long names: an answer of a few KB
            kafka.create_topic(f"{topic}-{i}-" + "x" * 200)
        body = kh._array(None) + b"\x00"
        t0 = time.monotonic()
        size = len(kh.kafka_request("127.0.0.1", proxy_port, kh.API_METADATA, 4, body, timeout=slowness.scaled(10)))
        unshaped = time.monotonic() - t0
        rate = max(1, size // 2000)
        proxy.add_toxic(type="bandwidth", attributes={"rate": rate})
        t0 = time.monotonic()
        kh.kafka_request("127.0.0.1", proxy_port, kh.API_METADATA, 4, body, timeout=slowness.scaled(60))
        capped = time.monotonic() - t0
        proxy.destroy_toxic("bandwidth_downstream")
        assert size >= 1500, size
        assert capped >= 0.8 * (size - 100) / (rate * 1000) and capped > unshaped, (size, rate, capped, unshaped)
        print(f"bandwidth toxic: {size} bytes at {rate} KB/s in {capped:.2f} s (unshaped {unshaped:.3f} s); latency 300 ms: {slowed:.3f} s")

        # reset_peer: the connection is reset instead of answered.
        proxy.add_toxic(type="reset_peer", attributes={"timeout": 0})
        with pytest.raises((ConnectionError, kh.KafkaHarnessError, OSError)):
            kh.metadata("127.0.0.1", proxy_port, timeout=slowness.scaled(10))
        proxy.destroy_toxic("reset_peer_downstream")
        kh.metadata("127.0.0.1", proxy_port, timeout=slowness.scaled(10))

        # kafka_error: InitProducerId answered with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a fatal
        # error for a transactional producer.
        consumer_api.post("/proxies/kafka/toxics", json={
            "name": "deny-init", "type": "kafka_error", "stream": "downstream",
            "attributes": {"api": "InitProducerId", "error": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}}).raise_for_status()
        denied = clients.txn_produce(bootstrap, topic, 10, 1, key_prefix="denied-", timeout=slowness.scaled(180))
        assert not denied["ok"] and "TransactionalIdAuthorization" in (denied.get("error") or ""), denied
        proxy.destroy_toxic("deny-init")
        assert consumer_api.get("/proxies/kafka/toxics").json() == []

        # Toxics gone: records exact again.
        after = clients.txn_produce(bootstrap, topic, 100, 2, key_prefix="after-")
        assert after["ok"] and after["records_committed"] == 100, after
        again = clients.read_committed(bootstrap, topic, 300)
        assert again["count"] == 300 and again["duplicates"] == 0 and again["content_mismatches"] == 0, again

        # Deleting the proxy closes its listener: the port refuses.
        proxy.destroy()
        with pytest.raises(OSError):
            kh.metadata("127.0.0.1", proxy_port, timeout=2)


def test_admin_api_adds_and_removes_a_listener_at_run_time(kafka):
    broker = kafka.bootstrap().split(",")[0]
    with Kproxy(broker, name="rtl", extra_yaml="admin: { listen: 127.0.0.1:0 }\n") as kp:
        status, body = _admin(kp, "PUT", "/listeners/late", {"listen": "127.0.0.1:0", "upstream": broker, "broker_ports": 0})
        assert status == 201, body
        port = int(body["address"].rsplit(":", 1)[1])
        meta = kh.metadata("127.0.0.1", port, timeout=slowness.scaled(10))
        (host, broker_port), = meta.brokers.values()
        assert host == "127.0.0.1" and broker_port not in (port, int(broker.rsplit(":", 1)[1])), meta.brokers
        # The broker port it handed out leads to the broker.
        assert kh.metadata("127.0.0.1", broker_port, timeout=slowness.scaled(10)).brokers == meta.brokers
        # The same checks and texts as the config file's.
        status, body = _admin(kp, "PUT", "/listeners/late", {"listen": "127.0.0.1:0", "upstream": broker, "broker_ports": 0})
        assert status == 409 and "'late' exists" in body["error"], body
        status, body = _admin(kp, "PUT", "/listeners/odd", {"listen": "127.0.0.1:0", "upstream": broker})
        # The right form, asking for what cannot be: 422 (docs/admin-api.openapi.yaml).
        assert status == 422 and "missing broker_ports" in body["error"], body
        # The port the kernel picked for 'late' is no claim of the config's: the bind refuses it.
        status, body = _admin(kp, "PUT", "/listeners/clash", {"listen": f"127.0.0.1:{port}", "upstream": broker, "broker_ports": 0})
        assert status == 409 and "address already in use" in body["error"], body
        status, body = _admin(kp, "PUT", "/listeners/tls", {"listen": "127.0.0.1:0", "upstream": broker, "broker_ports": 0,
                                                           "tls": {"cert": "/x", "key": "/y"}})
        assert status == 400 and "listeners[2].tls: not taken for a listener added at run time" in body["error"], body
        status, _ = _admin(kp, "DELETE", "/listeners/late?drain=0")
        assert status == 204
        with pytest.raises(OSError):
            kh.metadata("127.0.0.1", port, timeout=2)
        status, body = _admin(kp, "DELETE", "/listeners/late")
        assert status == 404, body
        status, body = _admin(kp, "DELETE", "/listeners/rtl")
        assert status == 409, body


def test_a_kafka_aware_proxy_for_a_three_broker_cluster_gives_each_broker_a_port(kafka_cluster):
    """`broker_ports: "0"` and `advertise`: each broker of the 3-node cluster gets a port the kernel
    picks, advertised at the given host; a transactional producer and a read_committed consumer
    bootstrapped at the proxy write and read exact, and Metadata names no broker's own port."""
    toxiproxy, consumer_api = _client()
    bootstrap_real = kafka_cluster.bootstrap()
    real_ports = {int(a.rsplit(":", 1)[1]) for a in bootstrap_real.split(",")}
    topic = f"toxk3-{int(time.time() * 1000)}"
    kafka_cluster.create_topic(topic, partitions=3, replication_factor=3)
    with Kproxy(bootstrap_real.split(",")[0], name="toxk3", extra_yaml="toxiproxy: { listen: 127.0.0.1:0 }\n") as kp:
        host, port = kp.wait_bound("toxiproxy", "api").rsplit(":", 1)
        server = toxiproxy.Toxiproxy()
        server.update_api_consumer(host, int(port))
        created = consumer_api.post("/proxies", json={"name": "cluster", "upstream": bootstrap_real.split(",")[0],
                                                      "listen": "127.0.0.1:0", "broker_ports": "0", "advertise": "127.0.0.1"})
        assert created.status_code == 201, created.text
        shown = created.json()
        assert shown["relay"] == "kafka" and shown["broker_ports"] == "0", shown
        proxy_port = int(shown["listen"].rsplit(":", 1)[1])
        meta = kh.metadata("127.0.0.1", proxy_port, timeout=slowness.scaled(10))
        assert len(meta.brokers) == 3, meta.brokers
        ports = {p for h, p in meta.brokers.values()}
        assert all(h == "127.0.0.1" for h, _ in meta.brokers.values()) and not ports & real_ports, (meta.brokers, real_ports)
        bootstrap = f"127.0.0.1:{proxy_port}"
        produced = clients.txn_produce(bootstrap, topic, 300, 3, key_prefix="c3-")
        assert produced["ok"] and produced["records_committed"] == 300, produced
        read = clients.read_committed(bootstrap, topic, 300)
        assert read["count"] == 300 and read["duplicates"] == 0 and read["content_mismatches"] == 0, read
        consumer_api.delete("/proxies/cluster").raise_for_status()
        with pytest.raises(OSError):
            kh.metadata("127.0.0.1", proxy_port, timeout=2)


def test_advertise_per_node_host_port_is_what_metadata_names(kafka):
    """`advertise: "N=host:port"` (issue #34): the broker is advertised at the address clients can
    reach, here a plain TCP Toxiproxy proxy standing in for a container's host-mapped port. Metadata
    through the Kafka-aware proxy names that host:port; a producer and consumer bootstrapped at the
    mapped address write and read exact and only ever connect to it."""
    toxiproxy, consumer_api = _client()
    broker = kafka.bootstrap().split(",")[0]
    broker_port = int(broker.rsplit(":", 1)[1])
    (node_id,) = kh.metadata("127.0.0.1", broker_port, timeout=slowness.scaled(10)).brokers
    topic = f"toxadv-{int(time.time() * 1000)}"
    kafka.create_topic(topic, partitions=2)
    with Kproxy(broker, name="toxadv", extra_yaml="toxiproxy: { listen: 127.0.0.1:0 }\n") as kp:
        host, port = kp.wait_bound("toxiproxy", "api").rsplit(":", 1)
        server = toxiproxy.Toxiproxy()
        server.update_api_consumer(host, int(port))
        # The "port mapping": a plain relay whose upstream is set once the Kafka proxy exists.
        mapped = consumer_api.post("/proxies", json={"name": "mapping", "upstream": "127.0.0.1:9", "listen": "127.0.0.1:0",
                                                     "kafka": False})
        assert mapped.status_code == 201, mapped.text
        mapped_port = int(mapped.json()["listen"].rsplit(":", 1)[1])

        # Refusals first: 400 in Toxiproxy's error shape, nothing created.
        for bad, text in [("localhost:32771", "a host:port needs a node id"),
                          (f"{node_id}=localhost:99999", "port must be a number from 1 to 65535"),
                          ("x=localhost:1", "a node id must be a number"),
                          (f"{node_id}=0.0.0.0:1", "cannot be handed to clients")]:
            status, refused = _call(f"http://{host}:{port}", "POST", "/proxies",
                                    {"name": "bad", "upstream": broker, "listen": "127.0.0.1:0", "advertise": bad})
            assert status == 400 and refused["status"] == 400 and set(refused) == {"error", "status"}, refused
            assert refused["error"].startswith("advertise: ") and text in refused["error"], refused
        assert _call(f"http://{host}:{port}", "GET", "/proxies/bad")[0] == 404

        advertise = f"{node_id}=localhost:{mapped_port}"
        created = consumer_api.post("/proxies", json={"name": "kafka", "upstream": broker, "listen": "127.0.0.1:0",
                                                      "advertise": advertise})
        assert created.status_code == 201, created.text
        shown = created.json()
        assert shown["relay"] == "kafka" and shown["advertise"] == advertise, shown
        proxy_port = int(shown["listen"].rsplit(":", 1)[1])
        status, patched = _call(f"http://{host}:{port}", "PATCH", "/proxies/mapping",
                                {"upstream": f"127.0.0.1:{proxy_port}", "kafka": False})
        assert status == 200 and patched["relay"] == "tcp", patched

        # Metadata through the proxy, and through the mapping, names the advertised host:port.
        meta = kh.metadata("127.0.0.1", proxy_port, timeout=slowness.scaled(10))
        assert meta.brokers == {node_id: ("localhost", mapped_port)}, meta.brokers
        assert kh.metadata("127.0.0.1", mapped_port, timeout=slowness.scaled(10)).brokers == meta.brokers

        bootstrap = f"localhost:{mapped_port}"
        reader = clients.start_java("ReadCommittedConsumer", ["--bootstrap", bootstrap, "--topic", topic, "--expect", 100,
                                                              "--timeout-ms", 120000])
        produced = clients.txn_produce(bootstrap, topic, 100, 2, key_prefix="adv-")
        assert produced["ok"] and produced["records_committed"] == 100, produced
        seen = set()
        deadline = time.monotonic() + slowness.scaled(60)
        while reader.proc.poll() is None and time.monotonic() < deadline:
            seen.update(_ports_of(reader.proc.pid))
            time.sleep(0.2)
        read = reader.result(timeout=slowness.scaled(120))
        assert read["count"] == 100 and read["duplicates"] == 0 and read["content_mismatches"] == 0, read
        assert not seen & {broker_port, proxy_port}, f"the consumer went around the advertised address: {seen}"
        print(f"advertise {advertise}: Metadata {meta.brokers}; consumer connected to ports {sorted(seen)}")
        consumer_api.delete("/proxies/kafka").raise_for_status()
        consumer_api.delete("/proxies/mapping").raise_for_status()


def test_a_kafka_upstream_down_at_creation_is_probed_at_the_first_connection(kafka):
    """Issue #34: a proxy created while nothing listens at its upstream is plain TCP and says it will
    probe again. A Kafka listener then opens there (a second kproxy, in front of the real broker:
    a listener of the same process would be refused as kproxy connecting to itself); the first client connection triggers the ApiVersions probe, the
    proxy reopens as a Kafka-aware listener at the same address (that connection is closed, the
    client connects again), and GET /proxies says why."""
    toxiproxy, consumer_api = _client()
    broker = kafka.bootstrap().split(",")[0]
    late_port = port_pool.free_port()
    extra = "toxiproxy: { listen: 127.0.0.1:0 }\nadmin: { listen: 127.0.0.1:0 }\n"
    with Kproxy(broker, name="toxlate", extra_yaml=extra) as kp, contextlib.ExitStack() as later:
        host, port = kp.wait_bound("toxiproxy", "api").rsplit(":", 1)
        server = toxiproxy.Toxiproxy()
        server.update_api_consumer(host, int(port))
        proxy = server.create(upstream=f"127.0.0.1:{late_port}", name="late", listen="127.0.0.1:0")
        shown = consumer_api.get("/proxies/late").json()
        assert shown["kafka"] is False and shown["relay"] == "tcp", shown
        assert shown["kafka_reason"] == ("the upstream was not up when probed (connect: Connection refused): "
                                         "probed again at the first connection"), shown
        proxy_port = int(proxy.listen.rsplit(":", 1)[1])

        # Kafka comes up at the upstream address.
        front = later.enter_context(Kproxy(broker, name="toxfront", port=late_port))
        front.wait_bound("listener", "toxfront")

        # The first connection is held while the probe runs, then closed as the proxy reopens as a
        # kproxy listener; a client connecting again gets Metadata naming only the proxy.
        attempts, meta = 0, None
        deadline = time.monotonic() + slowness.scaled(30)
        while meta is None and time.monotonic() < deadline:
            attempts += 1
            try:
                meta = kh.metadata("127.0.0.1", proxy_port, timeout=slowness.scaled(10))
            except (OSError, kh.KafkaHarnessError):
                time.sleep(0.1)
        assert meta is not None, "no Metadata through the proxy"
        assert list(meta.brokers.values()) == [("127.0.0.1", proxy_port)], meta.brokers
        assert attempts >= 2, "the first connection should have been closed by the switch to a kproxy listener"
        shown = consumer_api.get("/proxies").json()["late"]
        assert shown["kafka"] is True and shown["relay"] == "kafka", shown
        assert shown["kafka_reason"] == "probe at first connection: the upstream answered an ApiVersions request", shown
        assert shown["listen"] == f"127.0.0.1:{proxy_port}", shown
        status, listeners = _admin(kp, "GET", "/listeners")
        assert any(l["name"] == "toxiproxy-late" and l["runtime"] for l in listeners["listeners"]), listeners
        print(f"probe at first connection: Kafka after {attempts} connection attempts")
        proxy.destroy()
