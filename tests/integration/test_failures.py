"""Broker and proxy failures with real processes (issue #8): `kill -9` a Kafka broker under
traffic and restart it (a single node, then one node of the 3-node cluster), and `kill -9`
kproxy under a running transactional producer and restart it on the same ports.

What is asserted, and how:
* The Java clients finish their work through kproxy: every record acknowledged (idempotent
  producer, acks=all) and read exactly once; their own connection counters
  (connection-close-total) show that they did see the disconnects.
* kproxy leaks neither descriptors nor memory: /proc/<pid>/fd count and VmRSS once the clients
  have left, against a baseline taken after a warm-up run of the same clients (see _quiet_state
  and RSS_TOLERANCE_KIB for why that baseline and that tolerance).
* Transactions through a killed kproxy: the producer retries or fails as its timeouts say, new
  transactions commit once kproxy is back, and a read_committed reader sees every committed record
  exactly once, nothing of an aborted attempt, and each attempt of unknown outcome all or nothing.
"""

from __future__ import annotations

import collections
import os
import re
import socket
import time
import uuid
from pathlib import Path
from typing import Dict, List, Tuple

import clients
import kafka_harness as kh
import slowness
from test_proxy_support import Kproxy

# How much VmRSS may grow between the baseline (after a warm-up run of the same clients) and the
# state after the failure run once its clients left. kproxy frees a connection's memory when it
# closes, but the allocator keeps freed chunks for reuse instead of giving every page back, so RSS
# after a burst of connections reflects the busiest moment, not live bytes; a failure run has
# more connections at once (reconnect storms) than the warm-up. The kproxy runs with
# AddressSanitizer's quarantine off (_no_quarantine), which would otherwise add every byte freed.
# Measured on the tree of issues #15/#20 (ASan build, 2 workers), quarantine at its 256 MiB
# default / 16 MiB / off: single node +732 / +888 / +920 KiB, 3-node cluster +2,160 / +1,828 /
# +1,872 KiB (a clean-clone run saw +2,580 at the default, failing the old 2 MiB limit); earlier
# trees +192..+1,308 KiB. 4 MiB is ~2x the largest; the exact descriptor count is the sharper
# check (a leaked connection shows there).
# Live heap bytes from the sanitizer allocator would measure leaks without allocator retention:
# not done yet.
RSS_TOLERANCE_KIB = 4096


def _no_quarantine() -> Dict[str, str]:
    """The environment of a kproxy whose RSS is measured: in the sanitized build, AddressSanitizer
    holds freed memory in a quarantine of up to 256 MiB before reusing it, so RSS grows with every
    byte freed (connections made and closed, a slot ring given back when idle) until the
    quarantine is full, whatever is live. Off for these runs (use-after-free detection is what the
    rest of the suite is for). Ignored by a plain build."""
    asan = os.environ.get("ASAN_OPTIONS", "")
    return {"ASAN_OPTIONS": (asan + ":" if asan else "") + "quarantine_size_mb=0"}


def _quiet_state(kp: Kproxy, settle_s: float = 1.5, timeout: float = 20.0) -> Tuple[int, int]:
    """(fd count, VmRSS KiB) once kproxy's descriptor count stopped changing for `settle_s`
    (the clients' connections are closed by then: kproxy closes both sides when either closes)."""
    deadline = time.monotonic() + slowness.scaled(timeout)
    last = kp.fd_count()
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = kp.fd_count()
        if now != last:
            last, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since >= settle_s:
            break
    return last, kp.rss_kib()


def _load(bootstrap: str, topic: str, records: int, rate: float, key_prefix: str, **opts) -> clients.JavaRun:
    args = ["--bootstrap", bootstrap, "--topic", topic, "--records", records, "--rate", rate, "--key-prefix", key_prefix]
    for k, v in opts.items():
        args += [f"--{k.replace('_', '-')}", v]
    return clients.start_java("LoadProducer", args)


def _reader(bootstrap: str, topic: str, expect: int, key_prefix: str, timeout_ms: int = 120000) -> clients.JavaRun:
    """A consumer reading every partition (assigned, no group: a group member that loses its
    coordinator rejoins and, with nothing committed yet, legitimately re-reads from the start;
    an assigned reader keeps its positions, so a duplicate it sees is a duplicate in the log)."""
    return clients.start_java("ReadCommittedConsumer", [
        "--bootstrap", bootstrap, "--topic", topic, "--expect", expect,
        "--key-prefix", key_prefix, "--timeout-ms", timeout_ms, "--linger-ms", 1000,
        "--property", "reconnect.backoff.max.ms=1000"])


def _warm_up(kp: Kproxy, topic: str, key_prefix: str = "warm-") -> None:
    """One fault-free run of the same two clients, so the baseline already holds what a client
    session leaves behind for good (connection-id counters, metric series, allocator arenas)."""
    prod = _load(kp.bootstrap, topic, 500, 0, key_prefix)
    cons = _reader(kp.bootstrap, topic, 500, key_prefix)
    p, c = prod.result(120), cons.result(150)
    assert p["ok"] and c["ok"], (p, c)


def _assert_no_leak(kp: Kproxy, base: Tuple[int, int], what: str) -> Tuple[int, int]:
    fds, rss = _quiet_state(kp)
    print(f"[failures] {what}: kproxy fds {base[0]} -> {fds}, VmRSS {base[1]} -> {rss} KiB ({rss - base[1]:+d})")
    assert fds <= base[0], f"kproxy holds {fds} descriptors after the clients left, baseline {base[0]}"
    assert rss - base[1] <= RSS_TOLERANCE_KIB, f"kproxy VmRSS grew {rss - base[1]} KiB (baseline {base[1]} KiB)"
    return fds, rss


def _closed_by_broker(kp: Kproxy) -> int:
    return sum(1 for line in kp.log_text().splitlines() if "closed the connection" in line and "broker " in line)


def _assert_clients_rode_out_broker_kill(kp: Kproxy, base: Tuple[int, int], prod: clients.JavaRun,
                                         cons: clients.JavaRun, records: int, what: str) -> None:
    """The producer (_load) and the consumer (_reader) that ran through a broker kill finished:
    every record acknowledged and read once, both clients reconnected through kproxy, which saw
    the broker close and keeps no descriptor or memory of it."""
    p, c = prod.result(180), cons.result(200)
    print(f"[failures] producer {_brief(p)}\n[failures] consumer {_brief(c)}")
    assert p["ok"] and p["acked"] == records and p["failed"] == 0, p
    assert c["ok"] and (c["count"], c["unique_keys"], c["duplicates"], c["content_mismatches"]) == (records, records, 0, 0), c
    # Both clients lost their connections with the broker and made new ones through kproxy.
    assert p["connection_close_total"] >= 1 and c["connection_close_total"] >= 1, (p, c)
    assert _closed_by_broker(kp) >= 1, "kproxy logged no connection closed by the broker"
    assert kp.alive()
    _assert_no_leak(kp, base, what)


def test_broker_kill9_and_restart_under_traffic_single_node(kafka, topic_name):
    """The shared single broker is SIGKILLed while a producer and a consumer run through kproxy,
    and restarted 3 s later on the same ports and data dir: both clients reconnect through kproxy
    and finish; nothing lost or duplicated; kproxy keeps no descriptor and no memory of it.
    Whatever happens, the broker is left as found (restore() in finally) for the tests after it."""
    records = 2500
    node = kafka.nodes[0].node_id
    kafka.create_topic(topic_name, partitions=3)
    try:
        with Kproxy(kafka.bootstrap(), name="kill-single", workers=2, log_level="info", env=_no_quarantine()) as kp:
            _warm_up(kp, topic_name)
            base = _quiet_state(kp)

            prod = _load(kp.bootstrap, topic_name, records, 250, "k1-")
            cons = _reader(kp.bootstrap, topic_name, records, "k1-")
            prod.wait_for_line(r"acked=([5-9]\d\d|\d{4,})", timeout=90)  # >= 500 acked: traffic flows
            cons.wait_for_line(r"count=[1-9]", timeout=60)
            pid = kafka.kill_node(node)
            t_kill = time.monotonic()
            time.sleep(3)
            kafka.start_node(node, timeout=90)
            print(f"[failures] broker pid {pid} killed, back after {time.monotonic() - t_kill:.1f}s")

            _assert_clients_rode_out_broker_kill(kp, base, prod, cons, records, "single-node broker kill")
            assert kp.stop() == 0
    finally:
        kafka.restore(timeout=120)


def test_broker_kill9_and_restart_one_node_of_three(kafka_cluster, topic_name):
    """Node 1 of the 3-node cluster (leader of a partition, and the first bootstrap address kproxy
    knows) is SIGKILLed under traffic and left down until the controller has fenced it
    (broker.session.timeout.ms = 6 s) and its partitions have new leaders, then restarted: the clients follow
    the new leaders through kproxy's per-broker ports and finish; the node rejoins every ISR.
    Whatever happens, the shared cluster is left as found (restore() in finally)."""
    records = 3000
    victim = 1
    kafka_cluster.create_topic(topic_name, partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"})
    try:
        with Kproxy(kafka_cluster.bootstrap(), name="kill-node", workers=2, log_level="info", all_upstreams=True,
                    env=_no_quarantine()) as kp:
            _warm_up(kp, topic_name)
            base = _quiet_state(kp)
            leaders = {p.partition: p.leader for p in kafka_cluster.metadata([topic_name]).topics[topic_name].partitions.values()}
            assert victim in leaders.values(), leaders

            prod = _load(kp.bootstrap, topic_name, records, 200, "k3-")
            cons = _reader(kp.bootstrap, topic_name, records, "k3-")
            prod.wait_for_line(r"acked=([4-9]\d\d|\d{4,})", timeout=90)
            cons.wait_for_line(r"count=[1-9]", timeout=60)
            pid = kafka_cluster.kill_node(victim)
            t_kill = time.monotonic()
            moved, t_moved = _wait_leaders_without(kafka_cluster, topic_name, victim, timeout=60)
            time.sleep(2)  # traffic runs a little on the new leaders before the node comes back
            kafka_cluster.start_node(victim, timeout=120)
            print(f"[failures] node {victim} (pid {pid}) killed; leaders {leaders} -> {moved} "
                  f"{t_moved - t_kill:.1f}s later; node back after {time.monotonic() - t_kill:.1f}s")

            _assert_clients_rode_out_broker_kill(kp, base, prod, cons, records, "cluster node kill")
            assert kp.stop() == 0
    finally:
        # Leave the shared cluster as found: every node up, back in every ISR (internal topics too).
        kafka_cluster.restore(timeout=120)


def test_broker_port_taken_for_a_moment_is_opened_when_named_again(kafka):
    """kproxy opens a broker's port when a response first names the broker. If another process
    holds that port just then (on a busy host an ephemeral port can be anywhere), the next response
    naming the broker tries again, instead of leaving the broker unreachable for good (seen in a
    parallel EOS run: 'cannot open port ... address already in use', then 120 s of refused
    connections)."""
    node = kafka.nodes[0].node_id
    with Kproxy(kafka.bootstrap(), name="port-taken", log_level="info", broker_ports="block") as kp:  # the port before it opens
        port = kp.broker_port(node)
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            blocker.bind(("127.0.0.1", port))
            blocker.listen(1)
            md = kh.metadata("127.0.0.1", kp.port, ())
            assert md.brokers[node] == ("127.0.0.1", port)
            kp.wait_for_log(rf"cannot open port {port} for broker node {node}: .*address already in use")
        finally:
            blocker.close()
        kh.metadata("127.0.0.1", kp.port, ())  # names the broker again
        kp.wait_for_log(rf"opened 127\.0\.0\.1:{port} for broker node {node} at \S+ after 1 failed attempts")
        assert sorted(kh.metadata("127.0.0.1", port, ()).brokers) == [node]  # served through the broker port
        assert kp.stop() == 0


def _wait_leaders_without(cluster: kh.KafkaCluster, topic: str, node: int, timeout: float) -> Tuple[Dict[int, int], float]:
    """Waits until no partition of `topic` is led by `node` (the controller fenced it after
    broker.session.timeout.ms); returns the leaders and when it was seen."""
    timeout = slowness.scaled(timeout)
    deadline = time.monotonic() + timeout
    leaders: Dict[int, int] = {}
    while time.monotonic() < deadline:
        try:
            leaders = {p.partition: p.leader for p in cluster.metadata([topic]).topics[topic].partitions.values()}
            if node not in leaders.values() and all(l >= 0 for l in leaders.values()):
                return leaders, time.monotonic()
        except kh.KafkaHarnessError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"node {node} still leads {topic} partitions {timeout:.0f}s after it was killed: {leaders}")


def _brief(summary: Dict) -> Dict:
    return {k: v for k, v in summary.items() if not k.startswith("_") and k not in ("attempts", "duplicate_examples", "mismatch_examples")}


# ---------------------------------------------------------------------------------------------
# kill -9 kproxy under a running transactional producer
# ---------------------------------------------------------------------------------------------

def check_txn_outcomes(summary: Dict, rows: List[Tuple[int, int, str, str]]) -> Dict[str, int]:
    """TxnOutcomeProducer's outcomes against what read_committed returned: every record of a
    committed attempt exactly once (with its value), nothing of an aborted one, each attempt of
    unknown outcome all or nothing; nothing else. Returns counts per outcome as read."""
    prefix, per = summary["key_prefix"], summary["records_per_txn"]
    outcomes = summary["outcomes"]
    seen: Dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for _p, _o, key, value in rows:
        assert key.startswith(prefix), f"foreign record {key!r}"
        attempt = int(key[len(prefix):].split("-", 1)[0])
        assert 1 <= attempt <= len(outcomes), f"record {key!r} of no attempt"
        assert value == f"{key}|{attempt}|", f"{key!r} has value {value!r}"
        seen[attempt][key] += 1
    read = collections.Counter()
    for n, o in enumerate(outcomes, start=1):
        want = {f"{prefix}{n}-{i}" for i in range(per)}
        got = seen.get(n, collections.Counter())
        if o == "C" or (o == "U" and got):
            assert set(got) == want and max(got.values()) == 1, \
                f"attempt {n} ({o}): {len(got)} of {per} keys read, max copies {max(got.values(), default=0)}"
            read[o + "-visible"] += 1
        else:
            assert not got, f"attempt {n} ({o}) is not committed, yet {sum(got.values())} of its records are readable"
            read[o + "-invisible"] += 1
    return dict(read)


def _outcome_producer(bootstrap: str, topic: str, transactions: int, **opts) -> clients.JavaRun:
    args = ["--bootstrap", bootstrap, "--topic", topic, "--transactions", transactions,
            "--records-per-txn", 40, "--pause-ms", 250, "--key-prefix", "t",
            "--transactional-id", f"kill-kproxy-{uuid.uuid4().hex[:8]}"]
    for k, v in opts.items():
        args += [f"--{k.replace('_', '-')}", v]
    return clients.start_java("TxnOutcomeProducer", args)


def test_kproxy_kill9_and_restart_under_txn_producer_retries_within_its_timeouts(kafka, topic_name, tmp_path):
    """kproxy is SIGKILLed between transactions of a running Java transactional producer and
    restarted on the same ports 4 s later; delivery.timeout.ms and max.block.ms (30 s) outlast the
    gap, so the producer just reconnects and retries: every transaction commits, none aborts, and
    read_committed sees each record once."""
    kafka.create_topic(topic_name, partitions=3)
    with Kproxy(kafka.bootstrap(), name="kill-kproxy-a", log_level="info") as kp:
        prod = _outcome_producer(kp.bootstrap, topic_name, 16, delivery_timeout_ms=30000, max_block_ms=30000,
                                 request_timeout_ms=10000)
        prod.wait_for_line(r"^txn 4 C", timeout=90)
        pid = kp.kill()
        time.sleep(4)
        kp.restart()
        s = prod.result(150)
        print(f"[failures] kproxy pid {pid} killed for 4 s: producer {_brief(s)}")
        assert s["ok"] and s["outcomes"] == "C" * 16, s
        assert (s["aborted"], s["unknown"], s["producer_restarts"]) == (0, 0, 0), s
        cons, rows = clients.read_committed_dump(kp.bootstrap, topic_name, tmp_path / "read.tsv")
        assert check_txn_outcomes(s, rows) == {"C-visible": 16}
        assert len(rows) == 16 * 40
        assert kp.stop() == 0


def test_kproxy_kill9_longer_than_delivery_timeout_fails_then_new_txns_commit(kafka, topic_name, tmp_path):
    """kproxy stays down 15 s, longer than the producer's delivery.timeout.ms / max.block.ms (5 s)
    and its transaction.timeout.ms (10 s): the transaction in progress fails, and the root cause
    is the client's TimeoutException naming the configured 5 s (a batch expired after
    delivery.timeout.ms, or send() waited max.block.ms for metadata: which one depends on where
    the kill caught the client; in the second case send() blocks per call, so the application
    may only learn it once kproxy is back). The application aborts (abortTransaction itself
    retried on max.block.ms timeouts) and once kproxy is back on the same ports new transactions
    commit. read_committed then holds every committed attempt once and nothing of the failed ones."""
    kafka.create_topic(topic_name, partitions=3)
    want = 12
    with Kproxy(kafka.bootstrap(), name="kill-kproxy-b", log_level="info") as kp:
        prod = _outcome_producer(kp.bootstrap, topic_name, want, delivery_timeout_ms=5000, max_block_ms=5000,
                                 request_timeout_ms=2000, transaction_timeout_ms=10000)
        prod.wait_for_line(r"^txn 3 C", timeout=90)
        pid = kp.kill()
        t_kill = time.monotonic()
        first_error_s = None
        while time.monotonic() - t_kill < 15:
            if first_error_s is None and "\nerror txn " in "\n" + prod.stdout():
                first_error_s = time.monotonic() - t_kill
            time.sleep(0.1)
        kp.restart()
        s = prod.result(150)
        seen = f"{first_error_s:.1f}s after the kill" if first_error_s is not None else "only after the restart"
        print(f"[failures] kproxy pid {pid} killed for 15 s: the application saw the first error {seen}; producer {_brief(s)}")
        assert s["ok"] and s["committed"] == want, s
        failed = [a for a in s["attempts"] if a["o"] != "C"]
        assert failed, "no transaction failed although kproxy was down 3x delivery.timeout.ms"
        m = re.search(r"TimeoutException: (?:Expiring \d+ record\(s\) for \S+:(\d+) ms has passed since batch creation"
                      r"|Topic \S+ not present in metadata after (\d+) ms)", failed[0]["cause"] or "")
        assert m, failed[0]
        assert 5000 <= int(m.group(1) or m.group(2)) < 6000, failed[0]  # the configured 5 s, not another timeout
        assert s["outcomes"].endswith("CCC"), s["outcomes"]  # kproxy back: transactions commit again
        cons, rows = clients.read_committed_dump(kp.bootstrap, topic_name, tmp_path / "read.tsv")
        read = check_txn_outcomes(s, rows)
        print(f"[failures] read_committed: {len(rows)} records, attempts {read}")
        assert read.get("C-visible") == want and len(rows) >= want * 40
        assert kp.stop() == 0
