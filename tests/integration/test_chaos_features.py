"""Both transaction protocols in one cluster (issue #18): kproxy's ApiVersions policy rewrites the
features one client sees (docs/api-versions-policy.md), so a Java transactional client scoped by
client id runs the pre-KIP-890 path (transaction.version 1: AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn v4) while the 3-node Kafka 4.4 cluster has transaction.version 2 finalized and other
clients on the same kproxy keep using it.

    KPROXY_EOS_SEED              rule seed of the exactly-once run (default 20261129)
    KPROXY_FEATURES_EOS_SECONDS  how long input is fed to each path under faults (default 60)
    KPROXY_FEATURES_EOS_RATE     input records per second per path (default 50)
"""

from __future__ import annotations

import collections
import json
import os
import re
import socket
import struct
import time
import uuid
from typing import Dict, List, Optional, Tuple

import clients
import kafka_harness as kh
from test_chaos_support import ChaosKproxy
from test_eos_chaos import Feeder, _transformed, chaos_rules

SEED = int(os.environ.get("KPROXY_EOS_SEED", "20261129"))
EOS_SECONDS = float(os.environ.get("KPROXY_FEATURES_EOS_SECONDS", "60"))
EOS_RATE = float(os.environ.get("KPROXY_FEATURES_EOS_RATE", "50"))

# The one line that moves clients whose client.id starts with "legacy-" to the old protocol.
LEGACY_POLICY = 'api_versions:\n  - { feature: transaction.version, max: 1, client_id: "legacy-*" }\n'
METRICS = "metrics: { client_id_labels: true, max_label_values: 32 }\n"

PRODUCE, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT, API_VERSIONS = 0, 24, 25, 26, 28, 18


# --- ApiVersions v4 on the wire (the features are v3+ tagged fields) -------------------------------

def _uvarint(buf: bytes, at: int) -> Tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7


def _compact_str(buf: bytes, at: int) -> Tuple[str, int]:
    n, at = _uvarint(buf, at)
    return buf[at:at + n - 1].decode(), at + n - 1


def _skip_tags(buf: bytes, at: int) -> int:
    n, at = _uvarint(buf, at)
    for _ in range(n):
        _tag, at = _uvarint(buf, at)
        size, at = _uvarint(buf, at)
        at += size
    return at


def api_versions(bootstrap: str, client_id: str) -> Dict:
    """One ApiVersions v4 exchange as `client_id` (v4, as Java 4.x sends: below v4 a broker leaves
    out supported ranges starting at 0, KAFKA-17011): {apis: {key: (min, max)}, supported: {name: (min, max)},
    finalized: {name: level}, epoch}."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    cid = client_id.encode()
    header = struct.pack(">hhih", API_VERSIONS, 4, 7, len(cid)) + cid + b"\x00"  # request header v2
    body = b"\x0ekproxy-pytest\x021\x00"  # ClientSoftwareName, ClientSoftwareVersion, no tags
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", kh._recv_exact(s, 4))[0]
        buf = kh._recv_exact(s, size)
    at = 4  # correlation id (response header v0)
    error = struct.unpack(">h", buf[at:at + 2])[0]
    assert error == 0, error
    at += 2
    n, at = _uvarint(buf, at)
    apis = {}
    for _ in range(n - 1):
        k, lo, hi = struct.unpack(">hhh", buf[at:at + 6])
        apis[k] = (lo, hi)
        at = _skip_tags(buf, at + 6)
    at += 4  # throttle
    out = {"apis": apis, "supported": {}, "finalized": {}, "epoch": -1}
    tags, at = _uvarint(buf, at)
    for _ in range(tags):
        tag, at = _uvarint(buf, at)
        size, at = _uvarint(buf, at)
        end = at + size
        if tag in (0, 2):
            count, p = _uvarint(buf, at)
            for _ in range(count - 1):
                name, p = _compact_str(buf, p)
                a, b = struct.unpack(">hh", buf[p:p + 4])
                p = _skip_tags(buf, p + 4)
                if tag == 0:
                    out["supported"][name] = (a, b)
                else:
                    out["finalized"][name] = a  # MaxVersionLevel comes first
        elif tag == 1:
            out["epoch"] = struct.unpack(">q", buf[at:at + 8])[0]
        at = end
    return out


def _samples(text: str, name: str) -> List[Tuple[Dict[str, str], float]]:
    rx = re.compile(r"^" + re.escape(name) + r"(\{[^}]*\})?\s+(\S+)$", re.M)
    return [(dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or "")), float(m.group(2))) for m in rx.finditer(text)]


def versions_sent(text: str, api: str) -> Dict[int, int]:
    """{version: requests} of `api` through kproxy (kproxy_requests_total)."""
    out: Dict[int, int] = collections.Counter()
    for labels, v in _samples(text, "kproxy_requests_total"):
        if labels.get("api") == api and v:
            out[int(labels["version"])] += int(v)
    return dict(out)


def client_requests(text: str, api: str, client_id: str) -> int:
    return int(sum(v for labels, v in _samples(text, "kproxy_client_requests_total")
                   if labels.get("api") == api and labels.get("client_id") == client_id))


def test_features_seen_per_client_id(kafka_cluster):
    """The cluster finalizes transaction.version 2; through kproxy a "legacy-*" client sees 1 and
    the pre-KIP-890 API maxima, every other client the broker's answer, with the same epoch."""
    direct = api_versions(kafka_cluster.bootstrap(), "probe")
    assert direct["finalized"].get("transaction.version") == 2, direct["finalized"]
    assert direct["epoch"] >= 0
    with ChaosKproxy(kafka_cluster.bootstrap(), name="feat-seen", log_level="info", extra_yaml=LEGACY_POLICY) as kp:
        # The epoch moves with the cluster's metadata (other tests create topics): compare the
        # epochs of probes taken while the broker's own answer did not change.
        for _ in range(10):
            before = api_versions(kafka_cluster.bootstrap(), "probe")
            legacy = api_versions(kp.bootstrap, "legacy-probe")
            modern = api_versions(kp.bootstrap, "modern-probe")
            after = api_versions(kafka_cluster.bootstrap(), "probe")
            if before["epoch"] == after["epoch"]:
                direct = after
                break
        print(f"\n[features] broker {direct['finalized']} epoch {direct['epoch']}; legacy sees {legacy['finalized']}, "
              f"modern sees {modern['finalized']}")
        print(f"[features] supported: broker {direct['supported']}, legacy {legacy['supported']}")
        assert legacy["finalized"]["transaction.version"] == 1
        assert legacy["supported"]["transaction.version"] == direct["supported"]["transaction.version"]
        assert legacy["epoch"] == modern["epoch"] == direct["epoch"]
        assert {k: legacy["apis"][k][1] for k in (PRODUCE, END_TXN, TXN_OFFSET_COMMIT, ADD_PARTITIONS)} == \
            {PRODUCE: 11, END_TXN: 4, TXN_OFFSET_COMMIT: 4, ADD_PARTITIONS: 3}
        assert modern["finalized"] == direct["finalized"]
        assert modern["apis"][END_TXN][1] == direct["apis"][END_TXN][1] >= 5
        assert modern["apis"][PRODUCE][1] > 11

        # The admin API changes it at run time, for new connections; a bad entry changes nothing.
        status, body = kp.admin("PUT", "/api-versions", [{"feature": "group.version", "hide": True, "client_id": "legacy-*"},
                                                          {"feature": "transaction.version", "max": 1, "client_id": "legacy-*"}])
        assert status == 200, body
        legacy = api_versions(kp.bootstrap, "legacy-probe")
        assert "group.version" not in legacy["finalized"] and "group.version" not in legacy["supported"]
        assert 68 not in legacy["apis"] and 69 not in legacy["apis"]  # ConsumerGroupHeartbeat/Describe
        assert 68 in api_versions(kp.bootstrap, "modern-probe")["apis"]
        status, body = kp.admin("PUT", "/api-versions", [{"feature": "transaction.version", "min": 1}])
        assert status == 400 and "api_versions[0].min" in body["error"], body
        assert api_versions(kp.bootstrap, "legacy-probe")["finalized"]["transaction.version"] == 1


def test_transaction_version_1_for_one_client_while_another_stays_on_2(kafka_cluster, tmp_path):
    tag = uuid.uuid4().hex[:6]
    topics = {"legacy": f"feat-tv1-{tag}", "modern": f"feat-tv2-{tag}"}
    for t in topics.values():
        kafka_cluster.create_topic(t, partitions=3, replication_factor=3)
    with ChaosKproxy(kafka_cluster.bootstrap(), name="feat-txn", log_level="info", extra_yaml=LEGACY_POLICY + METRICS) as kp:
        runs = {path: clients.start_java("TxnProducer", [
            "--bootstrap", kp.bootstrap, "--topic", topics[path], "--records", 1000, "--transactions", 10,
            "--transactional-id", f"{path}-txn-{tag}", "--key-prefix", f"{path}-",
            "--property", f"client.id={path}-txn-producer"]) for path in topics}
        results = {path: run.result(timeout=240) for path, run in runs.items()}
        text = kp.metrics_text()
        assert kp.alive()

    for path, r in results.items():
        assert r["ok"], (path, r.get("error"), r["_stderr"][-3000:])
        assert (r["records_committed"], r["transactions_committed"]) == (1000, 10), r
    add_partitions = {p: client_requests(text, "AddPartitionsToTxn", f"{p}-txn-producer") for p in topics}
    end_txn = {p: client_requests(text, "EndTxn", f"{p}-txn-producer") for p in topics}
    seen = {api: versions_sent(text, api) for api in ("Produce", "EndTxn", "AddPartitionsToTxn", "InitProducerId")}
    print(f"\n[features] AddPartitionsToTxn per client {add_partitions}, EndTxn per client {end_txn}")
    print(f"[features] versions sent through kproxy {json.dumps(seen)}")
    # The legacy producer adds its partitions (KIP-890 part 1 path: AddPartitionsToTxn v3, EndTxn
    # v4, Produce v11); the other one never does (part 2: implicit add, EndTxn v5).
    assert add_partitions["legacy"] >= 10 and add_partitions["modern"] == 0, add_partitions
    assert end_txn["legacy"] >= 10 and end_txn["modern"] >= 10, end_txn
    assert set(seen["AddPartitionsToTxn"]) == {3}, seen
    assert seen["EndTxn"].get(4, 0) >= 10 and sum(n for v, n in seen["EndTxn"].items() if v >= 5) >= 10, seen
    assert seen["Produce"].get(11, 0) > 0 and sum(n for v, n in seen["Produce"].items() if v > 11) > 0, seen

    for path, topic in topics.items():
        _s, rows = clients.read_committed_dump(kafka_cluster.bootstrap(), topic, tmp_path / f"{path}.tsv")
        keys = collections.Counter(k for _p, _o, k, _v in rows)
        print(f"[features] {path}: read_committed {len(rows)} records, {len(keys)} distinct keys")
        assert len(rows) == 1000 and len(keys) == 1000
        assert set(keys) == {f"{path}-{i}" for i in range(1000)}


def test_eos_on_both_transaction_protocols_under_seeded_faults(kafka_cluster, tmp_path):
    """The exactly-once consume-transform-produce job of test_eos_chaos.py, twice at the same time
    through one kproxy: one job on transaction.version 1 (client ids "legacy-ctp-*"), one on 2,
    each under its own copy of the seeded fault mix (rules scoped by client id, so the injections
    are counted per path). Per path: input = output, nothing missing, nothing duplicated."""
    tag = uuid.uuid4().hex[:6]
    paths = {"legacy": SEED + 1, "modern": SEED}
    for path in paths:
        for kind in ("in", "out"):
            kafka_cluster.create_topic(f"feat-eos-{kind}-{path}-{tag}", partitions=3, replication_factor=3)
    with ChaosKproxy(kafka_cluster.bootstrap(), name="feat-eos", log_level="info", extra_yaml=LEGACY_POLICY + METRICS) as kp:
        for path, seed in paths.items():
            for name, rule in chaos_rules(seed).items():
                rule = json.loads(json.dumps(rule))
                rule["match"]["client_id"] = f"{path}-ctp-*"
                status, body = kp.admin("PUT", f"/faults/{path}-{name}", rule)
                assert status == 200, (name, status, body)
        stop_file = tmp_path / "stop"
        jobs = {path: clients.start_java("ConsumeTransformProduce", [
            "--bootstrap", kp.bootstrap, "--input", f"feat-eos-in-{path}-{tag}", "--output", f"feat-eos-out-{path}-{tag}",
            "--group", f"feat-eos-{path}-{tag}", "--transactional-id", f"feat-eos-{path}-{tag}", "--stop-file", stop_file,
            "--request-timeout-ms", 5000, "--delivery-timeout-ms", 5005, "--max-runtime-ms", int((EOS_SECONDS + 240) * 1000),
            "--producer-property", f"client.id={path}-ctp-producer",
            "--consumer-property", f"client.id={path}-ctp-consumer"]) for path in paths}
        try:
            for job in jobs.values():
                job.wait_for_line(r"^started", timeout=120)
            t_started = time.monotonic()
            feeders = {path: Feeder(kafka_cluster.bootstrap(), f"feat-eos-in-{path}-{tag}", EOS_SECONDS, EOS_RATE) for path in paths}
            for f in feeders.values():
                f.start()
            for f in feeders.values():
                f.join(EOS_SECONDS + 90)
                assert not f.is_alive(), "feeder did not finish"
                assert f.errors == [], f.errors
            stop_file.write_text("stop\n")
            summaries = {path: job.result(timeout=300) for path, job in jobs.items()}
            under_faults_s = time.monotonic() - t_started
        finally:
            for job in jobs.values():
                job.kill()
        status, faults = kp.admin("GET", "/faults")
        assert status == 200, faults
        text = kp.metrics_text()
        assert kp.admin("POST", "/faults/reset")[0] == 200
        kp_log = kp.log_text()
        assert kp.alive()

    print(f"\n[features-eos] seed {SEED} (legacy rules {paths['legacy']}), fed {EOS_SECONDS:.0f}s at {EOS_RATE:.0f}/s per path, "
          f"jobs under faults {under_faults_s:.0f}s")
    failures = []
    for path in paths:
        _si, inputs = clients.read_committed_dump(kafka_cluster.bootstrap(), f"feat-eos-in-{path}-{tag}", tmp_path / f"{path}-in.tsv")
        _so, outputs = clients.read_committed_dump(kafka_cluster.bootstrap(), f"feat-eos-out-{path}-{tag}", tmp_path / f"{path}-out.tsv")
        want = _transformed(inputs)
        got = collections.Counter((k, v) for _p, _o, k, v in outputs)
        missing, extra = want - got, got - want
        duplicates = sum(n - 1 for n in got.values() if n > 1)
        injected = {f["name"][len(path) + 1:]: (f["injected"], f["hits"]) for f in faults["faults"] if f["name"].startswith(path + "-")}
        s = summaries[path]
        producer = f"{path}-ctp-producer"
        txn_apis = {api: client_requests(text, api, producer) for api in ("AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn")}
        print(f"[features-eos] {path}: input {len(inputs)} (fed {feeders[path].sent}), output {len(outputs)}, "
              f"missing {sum(missing.values())}, extra {sum(extra.values())}, duplicates {duplicates}; "
              f"committed {s.get('transactions_committed')}, aborted {s.get('transactions_aborted')}, "
              f"producer restarts {s.get('producer_restarts')}; requests {json.dumps(txn_apis)}")
        print(f"[features-eos] {path}: injected/hits per rule {json.dumps(injected)} (total injected {sum(i for i, _h in injected.values())})")
        print(f"[features-eos] {path}: causes {json.dumps(s.get('causes'))}")
        if not s["ok"]:
            failures.append((path, "job failed", s.get("error"), s.get("_stderr", "")[-2000:]))
        if missing or extra or len(outputs) != len(inputs) or not inputs or len(inputs) != feeders[path].sent:
            failures.append((path, f"{sum(missing.values())} missing, {sum(extra.values())} extra", list(missing)[:3], list(extra)[:3]))
        for family in ("s1-", "s2-", "s3-", "s7-", "s14-"):
            if sum(i for name, (i, _h) in injected.items() if name.startswith(family)) == 0:
                failures.append((path, f"no {family} fault injected", injected))
        # Each job on its own protocol: TV1 adds partitions and offsets explicitly, TV2 never does.
        if path == "legacy" and not (txn_apis["AddPartitionsToTxn"] > 0 and txn_apis["AddOffsetsToTxn"] > 0):
            failures.append((path, "the legacy job did not use AddPartitionsToTxn/AddOffsetsToTxn", txn_apis))
        if path == "modern" and (txn_apis["AddPartitionsToTxn"] or txn_apis["AddOffsetsToTxn"] or not txn_apis["EndTxn"]):
            failures.append((path, "the transaction.version 2 job used the old path", txn_apis))
    print(f"[features-eos] versions sent: EndTxn {versions_sent(text, 'EndTxn')}, TxnOffsetCommit {versions_sent(text, 'TxnOffsetCommit')}, "
          f"AddOffsetsToTxn {versions_sent(text, 'AddOffsetsToTxn')}, Produce {versions_sent(text, 'Produce')}")
    assert under_faults_s >= EOS_SECONDS
    assert not failures, failures
    assert "correlation id mismatch" not in kp_log


def test_librdkafka_unaffected_by_transaction_version_policy(kafka_cluster, tmp_path):
    """librdkafka does not implement KIP-890 part 2 (it reads no features): with the policy on
    its client id (and so the implied Produce/EndTxn/AddPartitionsToTxn maxima), its transactions,
    idempotent produce and consume behave as without, with the same request versions as the
    same workload under a client id the policy does not name."""
    tag = uuid.uuid4().hex[:6]
    apis = ("Produce", "EndTxn", "AddPartitionsToTxn", "InitProducerId", "Fetch")
    policy = 'api_versions:\n  - { feature: transaction.version, max: 1, client_id: "legacy-rd-*" }\n'
    used: Dict[str, Dict[str, Dict[int, int]]] = {}
    with ChaosKproxy(kafka_cluster.bootstrap(), name="feat-rd", log_level="info", extra_yaml=policy + METRICS) as kp:
        assert api_versions(kp.bootstrap, "legacy-rd-probe")["apis"][END_TXN][1] == 4
        for who in ("legacy-rd", "other-rd"):
            txn_topic, plain_topic = f"feat-rd-txn-{who}-{tag}", f"feat-rd-{who}-{tag}"
            kafka_cluster.create_topic(txn_topic, partitions=2, replication_factor=3)
            kafka_cluster.create_topic(plain_topic, partitions=3, replication_factor=3)
            before = {api: versions_sent(kp.metrics_text(), api) for api in apis}
            out = clients.rd_txn_produce(kp.bootstrap, txn_topic, 600, 6, abort_every=3, key_prefix="rdtx-",
                                         conf={"client.id": f"{who}-txn"})
            prod = clients.rd_produce(kp.bootstrap, plain_topic, 500, conf={"client.id": f"{who}-producer"})
            cons = clients.rd_consume(kp.bootstrap, plain_topic, 500, key_prefix="rd-", conf={"client.id": f"{who}-consumer"})
            text = kp.metrics_text()
            used[who] = {api: {v: n - before[api].get(v, 0) for v, n in versions_sent(text, api).items() if n > before[api].get(v, 0)}
                         for api in apis}
            print(f"\n[features-rd] {who}: txn {out}, produce delivered {prod['delivered']}, consumed {cons['count']}; "
                  f"versions sent {json.dumps(used[who])}")
            assert out["errors"] == [] and (out["records_committed"], out["records_aborted"]) == (400, 200), out
            assert prod["errors"] == [] and prod["delivered"] == 500
            assert cons["errors"] == [] and (cons["count"], cons["unique_keys"], cons["duplicates"]) == (500, 500, 0)
            assert client_requests(text, "AddPartitionsToTxn", f"{who}-txn") > 0
            rc = clients.read_committed(kafka_cluster.bootstrap(), txn_topic, 400, key_prefix="rdtx-")
            assert rc["ok"] and (rc["count"], rc["duplicates"]) == (400, 0), rc
        assert kp.alive()
    assert {api: set(v) for api, v in used["legacy-rd"].items()} == {api: set(v) for api, v in used["other-rd"].items()}, used


def test_group_version_hidden_java_consumer_protocol_fails_instead_of_falling_back(kafka_cluster):
    """group.version hidden for one client id (and with it ConsumerGroupHeartbeat/Describe, the
    APIs a group.version 0 broker refuses): the Java consumer with group.protocol=consumer stops
    with UnsupportedVersionException; it does not fall back to the classic protocol. The same
    consumer under another client id reads everything."""
    tag = uuid.uuid4().hex[:6]
    topic = f"feat-gv-{tag}"
    kafka_cluster.create_topic(topic, partitions=2, replication_factor=3)
    prod = clients.rd_produce(kafka_cluster.bootstrap(), topic, 100, key_prefix="gv-")
    assert prod["errors"] == [] and prod["delivered"] == 100
    policy = 'api_versions:\n  - { feature: group.version, hide: true, client_id: "legacy-*" }\n'
    with ChaosKproxy(kafka_cluster.bootstrap(), name="feat-gv", log_level="info", extra_yaml=policy) as kp:
        seen = api_versions(kp.bootstrap, "legacy-probe")
        assert "group.version" not in seen["finalized"] and 68 not in seen["apis"]
        results = {}
        for who in ("legacy", "modern"):
            results[who] = clients.read_committed(kp.bootstrap, topic, 100, "--property", "group.protocol=consumer",
                                                  "--property", f"client.id={who}-consumer", timeout_ms=30000,
                                                  group=f"feat-gv-{who}-{tag}", key_prefix="gv-")
        assert kp.alive()
    legacy, modern = results["legacy"], results["modern"]
    print(f"\n[features-gv] legacy: ok {legacy['ok']} count {legacy['count']} error {legacy['error']}; "
          f"modern: ok {modern['ok']} count {modern['count']}")
    assert not legacy["ok"] and legacy["count"] == 0
    assert "UnsupportedVersionException" in (legacy["error"] or ""), legacy
    assert "does not support the new CONSUMER group protocol" in legacy["error"], legacy
    assert modern["ok"] and modern["count"] == 100, modern
