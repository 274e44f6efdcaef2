"""kproxy's Toxiproxy API (issue #34, docs/toxiproxy.md) driven by two more real Toxiproxy clients:
the Go client github.com/Shopify/toxiproxy/v2/client (pinned in toxiproxy_go/go.mod, driver
toxiproxy_go/driver.go, built by scripts/setup) and toxiproxy-java (Maven, pinned in
java/toxiproxy/pom.xml, driver java/toxiproxy/ToxiproxyJavaDriver.java, compiled here with the
JDK's javac). Each driver prints what the API answered and what it measured as one JSON line.

- In front of a TCP echo server the test starts: the proxy is created at run time, bytes pass
  exactly, latency, bandwidth, timeout and reset_peer toxics act on the raw bytes (measured
  round trip, throughput under the cap, the connection ended by the timeout, an RST), a
  kafka_error toxic is listed (no effect on raw bytes), and removing the toxics restores the
  plain relay; disabled, enabled, deleted.
- In front of the harness's Kafka broker: the proxy is detected as Kafka (GET /proxies says so
  and why), the kafka_error toxic is listed by the API; and a Java producer gets its records
  acknowledged through the proxy.
- For each client, a Kafka proxy it creates carries a Java transactional producer and a
  read_committed consumer: Metadata through it names only the proxy's address and the consumer
  holds no connection to the broker's port; a latency toxic the client adds delays a Metadata
  round trip; a kafka_error toxic on InitProducerId (Go: through the client; Java: plain HTTP
  POST) fails the producer with TransactionalIdAuthorization; once the client removes the
  toxics the records read back are exact.
- Toxiproxy's bandwidth, timeout and reset_peer toxics, added by each client to its Kafka proxy,
  act on Kafka traffic (measured): a Metadata answer of a few KB arrives no faster than the
  bandwidth cap allows, a request under the timeout toxic gets no answer, one under reset_peer
  is reset; each time the client removes the toxic the same request is answered again.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

import clients
import kafka_harness as kh
import slowness
from test_proxy_support import Kproxy
from test_toxiproxy_kafka_aware import _ports_of
from test_toxiproxy_tcp import EchoServer

# Where toxiproxy_go/build put it ($KPROXY_TOXIPROXY_GO_CACHE, as in that script).
GO_DRIVER = Path(os.environ.get("KPROXY_TOXIPROXY_GO_CACHE") or kh.REPO_ROOT / ".cache" / "toxiproxy-go") / "bin" / "toxiproxy-go-driver"
JAVA_LIBS = kh.REPO_ROOT / ".cache" / "toxiproxy-java" / "libs"
JAVA_SRC = kh.REPO_ROOT / "tests" / "integration" / "java" / "toxiproxy" / "ToxiproxyJavaDriver.java"

LATENCY_S = 0.3       # the latency toxic the drivers add (ms in the drivers: 300)
RATE_KBS = 100        # the bandwidth toxic's rate; the drivers send 150 000 bytes through it
TIMEOUT_S = 0.2       # the timeout toxic's timeout
RESET_S = 0.1         # the reset_peer toxic's timeout
KAFKA_RATE_KBS = 2    # the bandwidth toxic the drivers' kafka-bandwidth step adds (KB/s)


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory):
    if not list(JAVA_LIBS.glob("toxiproxy-java-*.jar")):
        pytest.fail(f"toxiproxy-java is not installed in {JAVA_LIBS}: run scripts/setup")
    out = tmp_path_factory.mktemp("toxiproxy-java-classes")
    p = subprocess.run([clients.javac_binary(), "-encoding", "UTF-8", "-Xlint:all", "-d", str(out), "-cp", f"{JAVA_LIBS}/*",
                        str(JAVA_SRC)], capture_output=True, text=True, timeout=slowness.scaled(120))
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def _run(cmd: list) -> dict:
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=slowness.scaled(90), stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _go(mode: str, api: str, upstream: str) -> dict:
    if not GO_DRIVER.exists():
        pytest.fail(f"the Go client driver is not built at {GO_DRIVER}: run scripts/setup")
    return _run([str(GO_DRIVER), mode, f"http://{api}", upstream])


def _java(classes, mode: str, api: str, upstream: str) -> dict:
    host, port = api.rsplit(":", 1)
    return _run([kh.java_binary(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                 "-cp", f"{classes}:{JAVA_LIBS}/*", "ToxiproxyJavaDriver", mode, host, port, upstream])


def _get(api: str, path: str):
    with urllib.request.urlopen(f"http://{api}{path}", timeout=slowness.scaled(10)) as r:
        return json.loads(r.read())


@pytest.fixture
def toxiproxy_api():
    kp = Kproxy("127.0.0.1:9", name="toxi-clients", extra_yaml="toxiproxy: { listen: 127.0.0.1:0, max_proxies: 4 }\n")
    echo = EchoServer()
    try:
        with kp:
            yield kp.wait_bound("toxiproxy", "api"), echo
            assert kp.alive(), kp.log_text()[-3000:]
    finally:
        echo.close()


def _check_tcp_effects(seen: dict, echo: EchoServer) -> None:
    """What both drivers measured through a proxy in front of the echo server."""
    assert seen["created"]["enabled"] is True, seen
    assert seen["created"]["listen"].startswith("127.0.0.1:") and not seen["created"]["listen"].endswith(":0"), seen
    assert seen["plain"]["error"] == "none", seen
    # latency 300 ms on what comes back: the round trip takes at least that; without it, far less.
    assert seen["latency"]["error"] == "none" and seen["latency"]["seconds"] >= LATENCY_S - 0.01, seen
    assert seen["after_latency"]["error"] == "none" and seen["after_latency"]["seconds"] < slowness.scaled(0.25), seen
    assert seen["after_latency"]["toxics"] == [], seen
    # bandwidth 100 KB/s: 150 000 bytes back take about 1.5 s; the measured rate stays under the cap
    # (10 % for the first burst).
    bw = seen["bandwidth"]
    assert bw["error"] == "none", seen
    rate_kbs = bw["bytes"] / 1000 / bw["seconds"]
    assert rate_kbs <= RATE_KBS * 1.1, (rate_kbs, seen)
    # timeout 200 ms on the upstream stream: nothing comes back, the connection ends after 200 ms.
    assert seen["timeout"]["bytes"] == 0 and seen["timeout"]["end"] in ("EOF", "ECONNRESET"), seen
    assert TIMEOUT_S - 0.01 <= seen["timeout"]["seconds"] < slowness.scaled(5), seen
    # reset_peer 100 ms: an RST, not a FIN (what was sent before it may come back first).
    assert seen["reset"]["end"] == "ECONNRESET" and seen["reset"]["bytes"] <= 4, seen
    assert RESET_S - 0.01 <= seen["reset"]["seconds"] < slowness.scaled(5), seen
    # Without toxics again: exact bytes, fast.
    assert seen["clean"]["error"] == "none" and seen["clean"]["toxics"] == [], seen
    assert seen["clean"]["seconds"] < slowness.scaled(0.25), seen
    assert seen["while_disabled"] == "ECONNREFUSED", seen
    assert seen["reenabled"] == "none", seen
    assert seen["proxies"] == 1, seen
    assert seen["after_delete"] == "ECONNREFUSED", seen
    # The echo server saw kproxy's probe and the proxied connections, nothing else: 1 probe + the
    # connections the driver made (plain, latency, after, bandwidth, timeout, reset, clean, reenabled).
    assert len(echo.peers) >= 7, echo.peers


def test_go_client_drives_a_tcp_proxy_and_its_toxics_act_on_raw_bytes(toxiproxy_api):
    api, echo = toxiproxy_api
    seen = _go("tcp", api, f"127.0.0.1:{echo.port}")
    print(json.dumps(seen))
    assert "kproxy" in seen["version"], seen
    assert seen["created"]["name"] == "go-echo" and seen["created"]["upstream"] == f"127.0.0.1:{echo.port}", seen
    assert seen["duplicate_status"] == 409, seen
    assert seen["latency_toxics"] == ["latency_downstream"], seen
    assert seen["bandwidth_updated_rate"] == 1000, seen
    assert seen["kafka_error"] == {"name": "produce-errors", "type": "kafka_error", "stream": "downstream",
                                   "attributes": {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}}, seen
    assert seen["kafka_error_toxics"] == ["produce-errors"], seen
    assert seen["bad_kafka_toxic_status"] == 400, seen
    assert seen["after_delete_status"] == 404, seen
    _check_tcp_effects(seen, echo)


def test_java_client_drives_a_tcp_proxy_and_its_toxics_act_on_raw_bytes(toxiproxy_api, java_classes):
    api, echo = toxiproxy_api
    seen = _java(java_classes, "tcp", api, f"127.0.0.1:{echo.port}")
    print(json.dumps(seen))
    assert "kproxy" in seen["version"], seen
    assert seen["created"]["name"] == "java-echo", seen
    assert seen["latency_toxics"] == ["slow"], seen
    assert seen["kafka_error_status"] == 200 and seen["kafka_error_removed"] == 204, seen
    # toxiproxy-java maps each listed toxic onto its own enum of Toxiproxy types: a proxy that
    # lists a Kafka toxic makes its getAll() fail (a limit of that client, docs/toxiproxy.md).
    assert seen["kafka_error_listed"].startswith("getAll failed"), seen
    assert seen["after_delete_lookup"] == "null", seen
    _check_tcp_effects(seen, echo)


@pytest.fixture
def kafka_toxiproxy(kafka):
    broker = kafka.bootstrap().split(",")[0]
    with Kproxy(broker, name="toxi-clients-k", extra_yaml="toxiproxy: { listen: 127.0.0.1:0, max_proxies: 4 }\n") as kp:
        yield kp.wait_bound("toxiproxy", "api"), broker
        assert kp.alive(), kp.log_text()[-3000:]


def test_go_and_java_clients_create_a_kafka_proxy_with_a_kafka_toxic(kafka_toxiproxy, java_classes, kafka, topic_name):
    api, broker = kafka_toxiproxy
    go = _go("kafka", api, broker)
    java = _java(java_classes, "kafka", api, broker)
    print(json.dumps({"go": go, "java": java}))
    for name in ("go-kafka", "java-kafka"):
        shown = _get(api, f"/proxies/{name}")
        assert shown["kafka"] is True and shown["kafka_reason"] == "the upstream answered an ApiVersions request", shown
        assert shown["upstream"] == broker, shown
    assert go["kafka_error"] == {"name": "fetch-errors", "type": "kafka_error",
                                 "attributes": {"api": "Fetch", "error": "NOT_LEADER_OR_FOLLOWER"}}, go
    assert go["toxics"] == ["fetch-errors"] and go["toxics_with_latency"] == ["fetch-errors", "latency_downstream"], go
    assert java["kafka_error_status"] == 200, java
    listed = sorted(t["name"] for t in _get(api, "/proxies/java-kafka/toxics"))
    assert listed == ["fetch-errors", "kafka-latency"], listed
    toxic = _get(api, "/proxies/java-kafka/toxics/fetch-errors")
    assert toxic["type"] == "kafka_error" and toxic["attributes"] == {"api": "Fetch", "error": "NOT_LEADER_OR_FOLLOWER"}, toxic

    # A Java producer through the Go client's proxy (its latency toxic slows the bootstrap).
    kafka.create_topic(topic_name, partitions=1)
    summary = clients.run_java("LoadProducer", ["--bootstrap", go["listen"], "--topic", topic_name, "--records", "20",
                                                "--rate", "0"], timeout=slowness.scaled(120))
    assert summary.get("ok") is True and summary.get("acked") == 20, summary


def _metadata_seconds(port: int) -> tuple:
    t0 = time.monotonic()
    meta = kh.metadata("127.0.0.1", port, timeout=slowness.scaled(10))
    return time.monotonic() - t0, meta


def _txn_round(bootstrap: str, broker_port: int, proxy_port: int, topic: str, total: int, prefix: str) -> None:
    """A read_committed consumer waits for `total` records while a transactional producer writes
    100 through `bootstrap`; the consumer holds no connection to the broker's own port."""
    reader = clients.start_java("ReadCommittedConsumer", ["--bootstrap", bootstrap, "--topic", topic, "--expect", total,
                                                          "--timeout-ms", 60000])
    produced = clients.txn_produce(bootstrap, topic, 100, 2, key_prefix=prefix, timeout=slowness.scaled(90))
    assert produced["ok"] and produced["records_committed"] == 100, produced
    deadline = time.monotonic() + slowness.scaled(60)
    while reader.proc.poll() is None and time.monotonic() < deadline:
        ports = _ports_of(reader.proc.pid)
        assert broker_port not in ports, f"the consumer reached the broker directly: {ports}"
        time.sleep(0.2)
    read = reader.result(timeout=slowness.scaled(90))
    assert read["count"] == total and read["duplicates"] == 0 and read["content_mismatches"] == 0, read


def _kafka_proxy_checks(listen: str, broker: str) -> tuple:
    proxy_port = int(listen.rsplit(":", 1)[1])
    broker_port = int(broker.rsplit(":", 1)[1])
    assert proxy_port != broker_port
    # Metadata through the proxy names the proxy's own address, nothing else.
    _, meta = _metadata_seconds(proxy_port)
    assert list(meta.brokers.values()) == [("127.0.0.1", proxy_port)], meta.brokers
    return proxy_port, broker_port


def test_java_client_kafka_proxy_carries_a_transactional_producer_and_consumer(kafka_toxiproxy, java_classes, kafka, topic_name):
    api, broker = kafka_toxiproxy
    kafka.create_topic(topic_name, partitions=1)
    created = _java(java_classes, "kafka-create", api, broker)
    proxy_port, broker_port = _kafka_proxy_checks(created["listen"], broker)
    bootstrap = f"127.0.0.1:{proxy_port}"
    _txn_round(bootstrap, broker_port, proxy_port, topic_name, 100, "clean-")
    plain, _ = _metadata_seconds(proxy_port)

    added = _java(java_classes, "kafka-toxics", api, broker)
    assert added["kafka_error_status"] == 200, added
    assert sorted(t["name"] for t in _get(api, "/proxies/java-txn/toxics")) == ["deny-init", "txn-latency"]
    slowed, _ = _metadata_seconds(proxy_port)
    assert slowed >= LATENCY_S - 0.01 and slowed > plain, (slowed, plain)
    denied = clients.txn_produce(bootstrap, topic_name, 10, 1, key_prefix="denied-", timeout=slowness.scaled(90))
    assert not denied["ok"] and "TransactionalIdAuthorization" in (denied.get("error") or ""), denied

    cleared = _java(java_classes, "kafka-clear", api, broker)
    assert cleared["kafka_error_removed"] == 204 and cleared["toxics"] == [], cleared
    after, _ = _metadata_seconds(proxy_port)
    assert after < LATENCY_S, after
    _txn_round(bootstrap, broker_port, proxy_port, topic_name, 200, "after-")
    print(f"java: metadata {plain:.3f} s plain, {slowed:.3f} s with the 300 ms latency toxic, {after:.3f} s after")


def test_go_client_kafka_proxy_carries_a_transactional_producer_and_consumer(kafka_toxiproxy, kafka, topic_name):
    """The Go driver's kafka mode (proxy + a Fetch kafka_error toxic + a 200 ms latency toxic, all
    through the Go client), then its kafka-deny step (an InitProducerId kafka_error toxic) and its
    kafka-clear step (every toxic removed through the client)."""
    api, broker = kafka_toxiproxy
    kafka.create_topic(topic_name, partitions=1)
    go = _go("kafka", api, broker)
    proxy_port, broker_port = _kafka_proxy_checks(go["listen"], broker)
    slowed, _ = _metadata_seconds(proxy_port)
    assert slowed >= 0.19, slowed
    bootstrap = f"127.0.0.1:{proxy_port}"
    # The producer is not touched by the Fetch toxic; Fetch answered NOT_LEADER_OR_FOLLOWER keeps
    # a consumer from reading the committed records while the toxic is there.
    produced = clients.txn_produce(bootstrap, topic_name, 100, 2, key_prefix="go-slow-", timeout=slowness.scaled(90))
    assert produced["ok"] and produced["records_committed"] == 100, produced
    stalled = clients.read_committed(bootstrap, topic_name, 100, timeout_ms=5000, timeout=slowness.scaled(60))
    assert stalled["count"] == 0, stalled

    denying = _go("kafka-deny", api, broker)
    assert denying["toxics"] == ["deny-init", "fetch-errors", "latency_downstream"], denying
    denied = clients.txn_produce(bootstrap, topic_name, 10, 1, key_prefix="denied-", timeout=slowness.scaled(90))
    assert not denied["ok"] and "TransactionalIdAuthorization" in (denied.get("error") or ""), denied

    cleared = _go("kafka-clear", api, broker)
    assert cleared["toxics"] == [] and _get(api, "/proxies/go-kafka/toxics") == [], cleared
    after, _ = _metadata_seconds(proxy_port)
    assert after < slowed, (after, slowed)
    _txn_round(bootstrap, broker_port, proxy_port, topic_name, 200, "go-")
    print(f"go: metadata {slowed:.3f} s with the 200 ms latency toxic, {after:.3f} s after")


def _kafka_shaping_effects(port: int, topics: list, step) -> dict:
    """Adds (through `step`, a driver run) the bandwidth, timeout and reset_peer toxics one at a
    time to the Kafka proxy at `port` and measures each on a Metadata request naming `topics`;
    each is removed ("kafka-clear") before the next. Returns the figures."""
    body = kh._array([kh._str(t) for t in topics]) + b"\x00"  # Metadata v4: these topics, no auto-creation

    def ask(timeout: float) -> tuple:
        t0 = time.monotonic()
        size = len(kh.kafka_request("127.0.0.1", port, kh.API_METADATA, 4, body, timeout=timeout))
        return size, time.monotonic() - t0

    size, plain = ask(slowness.scaled(10))
    assert size >= 3000, size
    added = step("kafka-bandwidth")
    _, capped = ask(slowness.scaled(60))
    assert step("kafka-clear")["toxics"] == [], "the bandwidth toxic stayed"
    # The toxic paces the answer at rate x 1000 bytes/s (docs/toxiproxy.md "Kafka-aware proxies").
    floor = 0.8 * size / (KAFKA_RATE_KBS * 1000)
    assert capped >= floor and capped > plain, (size, capped, plain, added)
    _, unshaped = ask(slowness.scaled(10))
    assert unshaped < capped, (unshaped, capped)

    step("kafka-timeout")
    wait = 1.5
    t0 = time.monotonic()
    with pytest.raises((OSError, kh.KafkaHarnessError)):  # socket.timeout: no answer comes
        ask(wait)
    silent = time.monotonic() - t0
    assert silent >= wait - 0.05, silent
    assert step("kafka-clear")["toxics"] == [], "the timeout toxic stayed"
    ask(slowness.scaled(10))

    step("kafka-reset")
    t0 = time.monotonic()
    with pytest.raises((OSError, kh.KafkaHarnessError)) as reset:
        ask(slowness.scaled(10))
    reset_after = time.monotonic() - t0
    assert not isinstance(reset.value, TimeoutError), "reset_peer should reset, not leave the request unanswered"
    assert step("kafka-clear")["toxics"] == [], "the reset_peer toxic stayed"
    ask(slowness.scaled(10))
    return {"bytes": size, "plain_s": round(plain, 3), "bandwidth_s": round(capped, 3), "bandwidth_floor_s": round(floor, 3),
            "timeout_silent_s": round(silent, 3), "reset_after_s": round(reset_after, 3), "reset": type(reset.value).__name__}


def test_go_and_java_clients_bandwidth_timeout_and_reset_peer_toxics_act_on_a_kafka_proxy(kafka_toxiproxy, java_classes, kafka):
    """Issue #34's check for the Go and Java clients (Python's is test_toxiproxy_kafka_aware.py):
    Toxiproxy's bandwidth, timeout and reset_peer toxics added through each client to its Kafka
    proxy, with their effects on Kafka requests measured."""
    api, broker = kafka_toxiproxy
    stamp = int(time.time() * 1000)
    topics = [f"toxshape-{stamp}-{i}-" + "x" * 200 for i in range(12)]
    for t in topics:
        kafka.create_topic(t)
    go = _go("kafka", api, broker)
    assert _go("kafka-clear", api, broker)["toxics"] == []
    go_port, _ = _kafka_proxy_checks(go["listen"], broker)
    go_seen = _kafka_shaping_effects(go_port, topics, lambda s: _go(s, api, broker))

    created = _java(java_classes, "kafka-create", api, broker)
    java_port, _ = _kafka_proxy_checks(created["listen"], broker)
    java_seen = _kafka_shaping_effects(java_port, topics, lambda s: _java(java_classes, s, api, broker))
    print(json.dumps({"go": go_seen, "java": java_seen}))
