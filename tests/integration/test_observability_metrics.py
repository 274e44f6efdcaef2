"""Observability (issue #6): /metrics, dashboards, Prometheus, /tap and `kproxy tap` against a real
Kafka 4.4.0 broker with the Java transactional producer running through kproxy.

- exact counts after a scrape (EndTxn requests == committed transactions; a fault injected N times
  shows N times in kproxy_faults_injected_total and in kproxy_response_errors_total);
- `promtool check metrics` finds nothing wrong in a real scrape;
- every metric a dashboard panel queries exists in a real scrape;
- a real Prometheus (Debian's `prometheus`, started here on loopback) scrapes kproxy while the
  workload runs and every panel's query returns data;
- the tap shows a Produce request and its response with the same correlation id, and the client's
  software name from ApiVersions (KIP-511); `kproxy tap` prints the stream;
- the admin token from admin.token_file (401 without it), the opt-in topic and client id labels
  with their cap (librdkafka producers with three client ids, a Java consumer whose Fetch v17
  names the topic by id only), and record contents in the tap only with tap.records on;
- transactions rebuilt from the wire (issue #32): the Java client's own counts, a hanging
  transaction (a producer killed with SIGKILL: open at once, timed_out after its timeout) and
  zombie fencing (a second producer with the same transactional.id), with the duration histogram.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import clients
import kafka_harness as kh
from test_proxy_support import Kproxy, kproxy_binary, stop_process

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((REPO / "dashboards").glob("*.json"))


def _admin_yaml(port: int) -> str:
    return f"admin: {{ listen: 127.0.0.1:{port} }}\n"


def _get(port: int, path: str, method: str = "GET", body: str = None, timeout: float = 10.0, token: str = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"} if body else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read().decode()
    conn.close()
    return resp.status, data


def _scrape(port: int, token: str = None) -> str:
    status, text = _get(port, "/metrics", token=token)
    assert status == 200, text
    return text


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$')


def _samples(text: str):
    """[(name, {label: value}, float)] of a text exposition."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"unparsable sample line: {line!r}"
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def _value(text: str, name: str, **labels) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    return sum(v for n, l, v in _samples(text) if n == name and all(l.get(k) == str(x) for k, x in labels.items()))


def _panel_queries():
    for path in DASHBOARDS:
        dash = json.loads(path.read_text())
        for panel in dash["panels"]:
            for target in panel["targets"]:
                yield path.name, panel["title"], target["expr"]


def _concrete(expr: str) -> str:
    return expr.replace("$__rate_interval", "1m").replace("$listener", ".*")


def _metric_names(expr: str):
    return set(re.findall(r"\b(kproxy_[a-z_]+)", expr))


def _family(name: str) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name.startswith("kproxy_request_duration_seconds"):
            return name[: -len(suffix)]
    return name


@pytest.fixture
def observed_kproxy(kafka, topic_name):
    admin_port = kh.free_ports(1)[0]
    kafka.create_topic(topic_name, partitions=2)
    with Kproxy(kafka.bootstrap(), name="obs", extra_yaml=_admin_yaml(admin_port), log_level="info") as kp:
        kp.admin_port = admin_port
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if _get(admin_port, "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        yield kp


def test_dashboards_are_valid_and_cover_the_issue():
    assert {p.name for p in DASHBOARDS} >= {"kproxy-overview.json", "kproxy-transactions.json"}
    exprs = " ".join(e for _f, _t, e in _panel_queries())
    for metric in ("kproxy_requests_total", "kproxy_request_duration_seconds_bucket", "kproxy_response_errors_total",
                   "kproxy_request_bytes_total", "kproxy_response_bytes_total", "kproxy_connections", "kproxy_clients",
                   "kproxy_faults_injected_total"):
        assert metric in exprs, metric
    txn = json.loads((REPO / "dashboards" / "kproxy-transactions.json").read_text())
    txn_exprs = " ".join(t["expr"] for p in txn["panels"] for t in p["targets"])
    for api in ("InitProducerId", "AddPartitionsToTxn", "EndTxn", "WriteTxnMarkers"):
        assert api in txn_exprs, api
    for metric in ("kproxy_transactions_total", "kproxy_transaction_duration_seconds_bucket", "kproxy_transaction_oldest_open_seconds",
                   "kproxy_transaction_fencing_events_total"):
        assert metric in txn_exprs, metric


def test_health_ready_log_level_and_auth_errors(observed_kproxy):
    kp = observed_kproxy
    status, body = _get(kp.admin_port, "/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok", body
    status, body = _get(kp.admin_port, "/readyz")
    assert status == 200, body
    assert _get(kp.admin_port, "/log-level")[1].strip() == '{"level":"info"}'
    status, body = _get(kp.admin_port, "/log-level", "PUT", '{"level":"debug"}')
    assert status == 200, body
    assert json.loads(_get(kp.admin_port, "/log-level")[1])["level"] == "debug"
    assert _get(kp.admin_port, "/log-level", "PUT", '{"level":"loud"}')[0] == 400
    # An empty ?level= is invalid even with a valid body (schemathesis seed 1722497108 found it accepted).
    assert _get(kp.admin_port, "/log-level?level=", "PUT", '{"level":"err"}')[0] == 400
    assert _get(kp.admin_port, "/nope")[0] == 404
    assert _get(kp.admin_port, "/tap?direction=sideways")[0] == 400


def test_exact_counts_after_a_transactional_workload_and_a_fault(observed_kproxy, topic_name):
    kp = observed_kproxy
    first = clients.txn_produce(kp.bootstrap, topic_name, records=500, transactions=5, key_prefix="obs-a-")
    assert first["ok"], first
    text = _scrape(kp.admin_port)
    assert _value(text, "kproxy_requests_total", api="EndTxn") == 5
    assert _value(text, "kproxy_responses_total", api="EndTxn") == 5
    # Every InitProducerId the client sent was answered; a retry is only ever caused by an error answer.
    init = _value(text, "kproxy_requests_total", api="InitProducerId")
    assert init == _value(text, "kproxy_responses_total", api="InitProducerId")
    assert init == 1 + _value(text, "kproxy_response_errors_total", api="InitProducerId")
    assert _value(text, "kproxy_request_duration_seconds_count", api="EndTxn") == 5
    assert _value(text, "kproxy_request_bytes_total", api="Produce") > 500 * 10
    assert _value(text, "kproxy_clients", software_name="apache-kafka-java") >= 0
    assert _value(text, "kproxy_connections_opened_total", side="client") >= 2
    assert _value(text, "kproxy_inflight_requests") == 0

    rule = {"match": {"api": "EndTxn"}, "action": {"answer": "CONCURRENT_TRANSACTIONS"}, "trigger": {"times": 2}}
    status, body = _get(kp.admin_port, "/faults/obs-endtxn", "PUT", json.dumps(rule))
    assert status == 200, body
    second = clients.txn_produce(kp.bootstrap, topic_name, records=300, transactions=3, key_prefix="obs-b-")
    assert second["ok"], second
    text = _scrape(kp.admin_port)
    assert _value(text, "kproxy_faults_injected_total", rule="obs-endtxn", api="EndTxn") == 2
    assert _value(text, "kproxy_response_errors_total", api="EndTxn", error="CONCURRENT_TRANSACTIONS") == 2
    # 5 + 3 committed, plus the 2 attempts kproxy answered itself.
    assert _value(text, "kproxy_requests_total", api="EndTxn") == 5 + 3 + 2
    # Synthetic answers have no broker round trip: the histogram counts only the 8 real ones.
    assert _value(text, "kproxy_request_duration_seconds_count", api="EndTxn") == 8
    assert _get(kp.admin_port, "/faults/obs-endtxn", "DELETE")[0] in (200, 204)


def test_transactions_rebuilt_from_the_wire_match_the_java_clients_own_counts(observed_kproxy, topic_name):
    """Issue #32: kproxy's transaction counts equal what the client says it committed and aborted,
    with and without an injected retry (CONCURRENT_TRANSACTIONS on EndTxn is retried, not an abort)."""
    kp = observed_kproxy
    names = ("committed", "aborted", "fenced", "timed_out", "unknown")
    before = _scrape(kp.admin_port)
    base = {o: _value(before, "kproxy_transactions_total", outcome=o) for o in names}
    base_durations = {o: _value(before, "kproxy_transaction_duration_seconds_count", outcome=o) for o in names}
    client_aborts = _value(before, "kproxy_transaction_aborts_total", cause="client", source="broker")

    out = clients.txn_produce(kp.bootstrap, topic_name, records=60, transactions=6, key_prefix="txo-a-", abort_every=3)
    assert out["ok"], out
    assert (out["transactions_committed"], out["transactions_aborted"]) == (4, 2)
    text = _scrape(kp.admin_port)
    assert _value(text, "kproxy_transactions_total", outcome="committed") - base["committed"] == 4
    assert _value(text, "kproxy_transactions_total", outcome="aborted") - base["aborted"] == 2
    # The client aborted on its own: no error caused it.
    assert _value(text, "kproxy_transaction_aborts_total", cause="client", source="broker") - client_aborts == 2
    assert _value(text, "kproxy_transactions_open") == 0
    assert _value(text, "kproxy_transaction_oldest_open_seconds") == 0
    # Each ended transaction is in the duration histogram of its outcome.
    for outcome, n in (("committed", 4), ("aborted", 2)):
        assert _value(text, "kproxy_transaction_duration_seconds_count", outcome=outcome) - base_durations[outcome] == n, outcome
        assert _value(text, "kproxy_transaction_duration_seconds_bucket", outcome=outcome, le="+Inf") - base_durations[outcome] == n
    # The id's history: every transaction with its outcome, the partitions the client wrote to.
    status, body = _get(kp.admin_port, "/transactions/" + urllib.parse.quote(out["transactional_id"], safe=""))
    assert status == 200, body
    history = json.loads(body)["transactions"]
    assert [t["outcome"] for t in history] == ["committed", "committed", "aborted", "committed", "committed", "aborted"]
    assert all(t["partitions"] and t["partitions"][0]["topic"] == topic_name for t in history), history
    assert sum(t["records"] for t in history) == 60
    assert all(t["cause"] is None for t in history)
    status, body = _get(kp.admin_port, "/transactions")
    assert status == 200 and json.loads(body)["count"] == 0, body
    # The same from the command line, as a table.
    cli = subprocess.run([str(kproxy_binary()), "transactions", "--admin", f"127.0.0.1:{kp.admin_port}", "show", out["transactional_id"]],
                         capture_output=True, text=True, timeout=30)
    assert cli.returncode == 0, cli.stderr
    lines = cli.stdout.splitlines()
    assert lines[0].startswith("TRANSACTIONAL_ID") and len(lines) == 1 + 6, cli.stdout
    assert sum(" committed " in line for line in lines) == 4 and sum(" aborted " in line for line in lines) == 2, cli.stdout

    rule = {"match": {"api": "EndTxn"}, "action": {"answer": "CONCURRENT_TRANSACTIONS"}, "trigger": {"times": 2}}
    status, body = _get(kp.admin_port, "/faults/txo-endtxn", "PUT", json.dumps(rule))
    assert status == 200, body
    try:
        second = clients.txn_produce(kp.bootstrap, topic_name, records=30, transactions=3, key_prefix="txo-b-")
    finally:
        _get(kp.admin_port, "/faults/txo-endtxn", "DELETE")
    assert second["ok"], second
    assert second["transactions_committed"] == 3
    text = _scrape(kp.admin_port)
    assert _value(text, "kproxy_faults_injected_total", rule="txo-endtxn") == 2
    assert _value(text, "kproxy_transactions_total", outcome="committed") - base["committed"] == 4 + 3
    assert _value(text, "kproxy_transactions_total", outcome="aborted") - base["aborted"] == 2
    for o in ("fenced", "timed_out", "unknown"):
        assert _value(text, "kproxy_transactions_total", outcome=o) == base[o], o
    assert _value(text, "kproxy_transactions_open") == 0


def _history(port: int, transactional_id: str) -> list:
    status, body = _get(port, "/transactions/" + urllib.parse.quote(transactional_id, safe=""))
    assert status == 200, body
    return json.loads(body)["transactions"]


def test_a_killed_producer_leaves_a_hanging_transaction_that_ends_timed_out(observed_kproxy, topic_name):
    """Issue #32: a Java transactional producer (transaction.timeout.ms=5000) begins a transaction,
    writes records, and is killed with SIGKILL. Within 1 s of the kill GET /transactions lists it
    and kproxy_transaction_oldest_open_seconds is above 0; nothing of the dead producer will ever
    end it, so kproxy infers the end: once it is older than the timeout its InitProducerId
    announced, it ends timed_out (kproxy_transactions_total, the duration histogram at exactly the
    timeout, the id's history). The coordinator's own abort is watched with describeTransactions."""
    kp = observed_kproxy
    timeout_ms = 5000
    txn_id = f"hang-{os.getpid()}-{time.monotonic_ns()}"
    names = ("committed", "aborted", "fenced", "timed_out", "unknown")
    before = _scrape(kp.admin_port)
    base = {o: _value(before, "kproxy_transactions_total", outcome=o) for o in names}
    hist = lambda text, **l: _value(text, "kproxy_transaction_duration_seconds_bucket", outcome="timed_out", **l)
    base_hist = {le: hist(before, le=le) for le in ("2.5", "5", "+Inf")}
    base_sum = _value(before, "kproxy_transaction_duration_seconds_sum", outcome="timed_out")

    producer = clients.start_java("HangingTxnProducer", ["--bootstrap", kp.bootstrap, "--topic", topic_name, "--transactional-id", txn_id,
                                                         "--records", 10, "--transaction-timeout-ms", timeout_ms])
    try:
        producer.wait_for_line(r"^hanging ", timeout=90)
        killed_wall = time.time()
        killed = time.monotonic()
        os.killpg(producer.proc.pid, signal.SIGKILL)
    finally:
        producer.kill()
    assert producer.proc.returncode == -signal.SIGKILL, producer.proc.returncode

    # Poll (no fixed sleep) until it is listed and the gauge shows it: within 1 s of the kill.
    listed, oldest = [], 0.0
    while True:
        status, body = _get(kp.admin_port, "/transactions")
        assert status == 200, body
        listed = [t for t in json.loads(body)["transactions"] if t["transactional_id"] == txn_id]
        oldest = _value(_scrape(kp.admin_port), "kproxy_transaction_oldest_open_seconds")
        shown = time.monotonic()
        if (listed and oldest > 0) or shown - killed > 1.0:
            break
        time.sleep(0.01)
    kill_to_gauge = shown - killed
    print(f"\nhanging transaction: kill -> listed in GET /transactions and kproxy_transaction_oldest_open_seconds > 0: "
          f"{kill_to_gauge * 1000:.0f} ms (gauge {oldest:.3f} s)")
    assert listed and oldest > 0, (listed, oldest)
    assert kill_to_gauge <= 1.0, kill_to_gauge
    t = listed[0]
    assert t["outcome"] == "open" and t["records"] == 10 and t["client_id"] == "kproxy-hanging-producer", t
    assert t["partitions"] and all(p["topic"] == topic_name for p in t["partitions"]), t
    begun = shown - t["started_seconds_ago"]  # when kproxy saw its first AddPartitionsToTxn or Produce

    # The coordinator's view, from another client, while kproxy waits for the timeout.
    watcher = clients.start_java("TxnStateWatcher", ["--bootstrap", kp.bootstrap, "--transactional-id", txn_id,
                                                     "--timeout-ms", 60000, "--interval-ms", 100])
    try:
        deadline = killed + timeout_ms / 1000 + 30
        while True:
            text = _scrape(kp.admin_port)
            if _value(text, "kproxy_transactions_total", outcome="timed_out") > base["timed_out"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        ended = time.monotonic()
        print(f"hanging transaction: kill -> timed_out in kproxy_transactions_total: {ended - killed:.2f} s "
              f"(begin -> timed_out {ended - begun:.2f} s; transaction.timeout.ms {timeout_ms} ms)")
        assert _value(text, "kproxy_transactions_total", outcome="timed_out") - base["timed_out"] == 1, text
        # Not before its time: kproxy ends it once it is older than its timeout, not earlier.
        assert ended - begun >= timeout_ms / 1000 - 0.05, (ended - begun)
        for o in ("committed", "aborted", "fenced", "unknown"):
            assert _value(text, "kproxy_transactions_total", outcome=o) == base[o], o
        # It lasted its timeout, to the millisecond: the le="5" bucket, not le="2.5".
        assert hist(text, le="2.5") == base_hist["2.5"]
        assert hist(text, le="5") - base_hist["5"] == 1
        assert hist(text, le="+Inf") - base_hist["+Inf"] == 1
        assert _value(text, "kproxy_transaction_duration_seconds_sum", outcome="timed_out") - base_sum == pytest.approx(5.0, abs=1e-6)
        assert _value(text, "kproxy_transactions_open") == 0
        assert _value(text, "kproxy_transaction_oldest_open_seconds") == 0
        status, body = _get(kp.admin_port, "/transactions")
        assert status == 200 and all(t["transactional_id"] != txn_id for t in json.loads(body)["transactions"]), body
        coordinator = watcher.result(timeout=120)
    finally:
        watcher.kill()
    assert coordinator["ok"], coordinator
    print(f"hanging transaction: coordinator state {coordinator['first_state']} -> {coordinator['state']} "
          f"{coordinator['changed_at_ms'] / 1000 - killed_wall:.2f} s after the kill (first seen then; polled every 100 ms), "
          f"producer epoch {t['producer_epoch']} -> {coordinator['producer_epoch']}")
    assert coordinator["state"] == "CompleteAbort", coordinator
    # After the coordinator's abort, the id's history still has it timed_out, with what it wrote.
    history = _history(kp.admin_port, txn_id)
    assert [h["outcome"] for h in history] == ["timed_out"], history
    assert history[0]["duration_seconds"] == pytest.approx(timeout_ms / 1000, abs=1e-6), history[0]
    assert history[0]["records"] == 10 and history[0]["producer_epoch"] == t["producer_epoch"], history[0]
    assert history[0]["fenced_by"] is None, history[0]


def test_a_second_producer_fences_the_first_and_the_history_names_both_epochs(observed_kproxy, topic_name):
    """Issue #32: two Java producers with the same transactional.id. The second's initTransactions
    fences the first, whose next send and commit fail (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH).
    kproxy counts one fencing event and one fenced transaction; the id's history shows the fenced
    transaction with its epoch, the epoch that fenced it and the zombie's refused send, then the
    new producer's committed transaction at that epoch."""
    kp = observed_kproxy
    txn_id = f"fence-{os.getpid()}-{time.monotonic_ns()}"
    before = _scrape(kp.admin_port)
    fencing = _value(before, "kproxy_transaction_fencing_events_total")
    base = {o: _value(before, "kproxy_transactions_total", outcome=o) for o in ("committed", "aborted", "fenced", "timed_out")}
    fenced_durations = _value(before, "kproxy_transaction_duration_seconds_count", outcome="fenced")
    aborts = {c: _value(before, "kproxy_transaction_aborts_total", cause=c) for c in ("new_producer", "client")}

    out = clients.run_java("FencedTxnProducers", ["--bootstrap", kp.bootstrap, "--topic", topic_name, "--transactional-id", txn_id,
                                                  "--records", 5], timeout=120)
    assert out["ok"], out
    print(f"\nfencing: the first producer's send failed with {out['a_send_error']!r}, its commit with {out['a_commit_error']!r}")

    text = _scrape(kp.admin_port)
    assert _value(text, "kproxy_transaction_fencing_events_total") - fencing == 1, "one fencing, counted once"
    assert _value(text, "kproxy_transactions_total", outcome="fenced") - base["fenced"] == 1
    assert _value(text, "kproxy_transactions_total", outcome="committed") - base["committed"] == 1
    assert _value(text, "kproxy_transactions_total", outcome="aborted") == base["aborted"]
    assert _value(text, "kproxy_transactions_total", outcome="timed_out") == base["timed_out"]
    assert _value(text, "kproxy_transaction_duration_seconds_count", outcome="fenced") - fenced_durations == 1
    # No error came before the fencing: its cause is the new producer, not the application.
    assert _value(text, "kproxy_transaction_aborts_total", cause="new_producer", source="broker") - aborts["new_producer"] == 1
    assert _value(text, "kproxy_transaction_aborts_total", cause="client") == aborts["client"]
    assert _value(text, "kproxy_transactions_open") == 0

    history = _history(kp.admin_port, txn_id)
    assert [h["outcome"] for h in history] == ["fenced", "committed"], history
    zombie, successor = history
    print(f"fencing: fenced transaction producer {zombie['producer_id']} epoch {zombie['producer_epoch']}, "
          f"fenced_by {zombie['fenced_by']}; the new producer's committed one: epoch {successor['producer_epoch']}; "
          f"the zombie's errors: {[(e['api'], e['error']) for e in zombie['errors']]}")
    assert zombie["client_id"] == "kproxy-fenced-a" and successor["client_id"] == "kproxy-fenced-b", history
    assert zombie["fenced_by"] == {"producer_id": successor["producer_id"], "producer_epoch": successor["producer_epoch"]}, history
    assert zombie["fenced_by"]["producer_epoch"] > zombie["producer_epoch"], zombie
    assert successor["fenced_by"] is None
    # Only what the first producer wrote before it was fenced: the zombie's refused record is not in it.
    assert zombie["records"] == 5 and successor["records"] == 5, history
    refused = [e for e in zombie["errors"] if e["error"] in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")]
    assert refused and refused[0]["api"] == "Produce" and refused[0]["injected_by"] is None, zombie["errors"]
    assert successor["errors"] == [], successor


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs Debian's prometheus package (promtool)")
def test_promtool_finds_nothing_and_dashboards_query_existing_metrics(observed_kproxy, topic_name):
    kp = observed_kproxy
    rule = {"match": {"api": "EndTxn"}, "action": {"answer": "CONCURRENT_TRANSACTIONS"}, "trigger": {"times": 1}}
    assert _get(kp.admin_port, "/faults/obs-one", "PUT", json.dumps(rule))[0] == 200
    prod = clients.txn_produce(kp.bootstrap, topic_name, records=100, transactions=2, key_prefix="obs-p-", abort_every=2)
    assert prod["ok"], prod
    text = _scrape(kp.admin_port)
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0 and check.stdout.strip() == "" and check.stderr.strip() == "", (check.stdout, check.stderr)
    families = {n for n, _l, _v in _samples(text)}
    families |= {_family(n) for n in families}
    families |= {re.sub(r"_(bucket|sum|count)$", "", n) for n in families}
    for dashboard, title, expr in _panel_queries():
        for metric in _metric_names(expr):
            assert metric in families or _family(metric) in families, f"{dashboard} / {title}: {metric} not in a real scrape"


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs Debian's prometheus package")
def test_real_prometheus_scrapes_and_every_panel_returns_data(observed_kproxy, topic_name):
    kp = observed_kproxy
    prom_port = kh.free_ports(1)[0]
    work = Path(tempfile.mkdtemp(prefix="kproxy-prom-"))
    (work / "prometheus.yml").write_text(
        "global: { scrape_interval: 1s, evaluation_interval: 1s }\n"
        "scrape_configs:\n"
        "  - job_name: kproxy\n"
        f"    static_configs: [ {{ targets: ['127.0.0.1:{kp.admin_port}'] }} ]\n")
    log = open(work / "prometheus.log", "wb")
    prom = subprocess.Popen(["prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=kh._child_setup)
    try:
        def query(expr):
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
            assert body["status"] == "success", body
            return body["data"]["result"]

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if query('up{job="kproxy"}') and query('up{job="kproxy"}')[0]["value"][1] == "1":
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("Prometheus never scraped kproxy: " + (work / "prometheus.log").read_text()[-2000:])

        rule = {"match": {"api": "EndTxn"}, "action": {"answer": "CONCURRENT_TRANSACTIONS"}, "trigger": {"times": 1}}
        assert _get(kp.admin_port, "/faults/prom-endtxn", "PUT", json.dumps(rule))[0] == 200
        # A client that stays connected while Prometheus scrapes (clients gauge, connections, in-flight).
        # Every 2nd transaction aborted: the transaction panels' aborts have data too.
        rounds = [clients.txn_produce(kp.bootstrap, topic_name, records=200, transactions=4, key_prefix=f"prom-{i}-", abort_every=2)
                  for i in range(2)]
        assert all(r["ok"] for r in rounds), rounds
        time.sleep(3)  # two more scrapes after the workload
        empty = []
        for dashboard, title, expr in _panel_queries():
            result = query(_concrete(expr))
            if not result:
                empty.append(f"{dashboard} / {title}: {expr}")
        assert not empty, "panels without data:\n" + "\n".join(empty)
    finally:
        stop_process(prom)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


class _TapReader(threading.Thread):
    """Follows GET /tap (chunked JSON lines) until stopped."""

    def __init__(self, port: int, query: str = "", token: str = None):
        super().__init__(daemon=True)
        self.port, self.query, self.token = port, query, token
        self.lines = []
        self.sock = None
        self.connected = threading.Event()

    def run(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        auth = f"Authorization: Bearer {self.token}\r\n" if self.token else ""
        self.sock.sendall(f"GET /tap{self.query} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n".encode())
        f = self.sock.makefile("rb")
        status = f.readline()
        assert b" 200 " in status, status
        while f.readline() not in (b"\r\n", b""):
            pass
        self.connected.set()
        buf = b""
        try:
            while True:
                size_line = f.readline()
                if not size_line:
                    break
                size = int(size_line.strip() or b"0", 16)
                if size == 0:
                    break
                buf += f.read(size)
                f.readline()
                *complete, buf = buf.split(b"\n")
                self.lines.extend(json.loads(l) for l in complete if l.strip())
        except (OSError, ValueError):
            pass

    def stop(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.join(10)


def test_tap_follows_each_transaction_step_by_step(observed_kproxy, topic_name):
    """Issue #32: GET /tap?transactions=true (and kproxy tap --transactions) gives one line per step
    of each transaction, with the injected error and its rule, and no frames."""
    kp = observed_kproxy
    steps = _TapReader(kp.admin_port, "?transactions=true")
    steps.start()
    assert steps.connected.wait(10)
    cli_out = tempfile.TemporaryFile()
    cli = subprocess.Popen([kproxy_binary(), "tap", "--admin", f"127.0.0.1:{kp.admin_port}", "--transactions"], stdout=cli_out,
                           stderr=subprocess.STDOUT)
    rule = {"match": {"api": "EndTxn"}, "action": {"answer": "CONCURRENT_TRANSACTIONS"}, "trigger": {"times": 1}}
    assert _get(kp.admin_port, "/faults/tap-endtxn", "PUT", json.dumps(rule))[0] == 200
    try:
        # The CLI's subscription is in once the hub counts two subscribers.
        deadline = time.monotonic() + 10
        while _value(_scrape(kp.admin_port), "kproxy_tap_subscribers") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        prod = clients.txn_produce(kp.bootstrap, topic_name, records=30, transactions=3, key_prefix="tapx-", abort_every=3)
        assert prod["ok"], prod
        mine = lambda: [l for l in steps.lines if l.get("transactional_id") == prod["transactional_id"]]
        deadline = time.monotonic() + 10
        while sum(l["transaction"] == "end" for l in mine()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        _get(kp.admin_port, "/faults/tap-endtxn", "DELETE")
        steps.stop()
        cli.terminate()
        cli.wait(10)
    lines = mine()
    assert all("transaction" in l and "direction" not in l for l in steps.lines), "a frame reached a transactions subscriber"
    kinds = [l["transaction"] for l in lines]
    assert kinds.count("begin") == 3 and kinds.count("end") == 3, kinds
    assert [l["outcome"] for l in lines if l["transaction"] == "end"] == ["committed", "committed", "aborted"], lines
    injected = [l for l in lines if l["transaction"] == "error"]
    assert len(injected) == 1 and injected[0]["error"] == "CONCURRENT_TRANSACTIONS" and injected[0]["injected_by"] == "tap-endtxn", injected
    assert any(l["transaction"] == "partitions_added" and l["partitions"][0]["topic"] == topic_name for l in lines), kinds
    cli_out.seek(0)
    cli_text = cli_out.read().decode(errors="replace")
    assert f"txn {prod['transactional_id']}" in cli_text and " end committed after " in cli_text, cli_text[-2000:]
    assert "(injected by rule tap-endtxn)" in cli_text, cli_text[-2000:]


def test_tap_shows_produce_request_and_response_and_client_software(observed_kproxy, topic_name):
    kp = observed_kproxy
    tap = _TapReader(kp.admin_port)
    produce_only = _TapReader(kp.admin_port, "?api=Produce&direction=response")
    tap.start()
    produce_only.start()
    assert tap.connected.wait(10) and produce_only.connected.wait(10)
    cli_out = tempfile.TemporaryFile()
    cli = subprocess.Popen([kproxy_binary(), "tap", "--admin", f"127.0.0.1:{kp.admin_port}", "--api", "Produce"], stdout=cli_out,
                           stderr=subprocess.STDOUT)
    time.sleep(1.0)
    prod = clients.txn_produce(kp.bootstrap, topic_name, records=100, transactions=1, key_prefix="tap-")
    assert prod["ok"], prod
    time.sleep(1.5)
    tap.stop()
    produce_only.stop()
    cli.terminate()
    cli.wait(10)
    cli_out.seek(0)
    cli_text = cli_out.read().decode(errors="replace")

    requests = {(l["connection"], l["correlation_id"]): l for l in tap.lines if l["api"] == "Produce" and l["direction"] == "request"}
    responses = [l for l in tap.lines if l["api"] == "Produce" and l["direction"] == "response"]
    assert requests and responses, [(l["api"], l["direction"]) for l in tap.lines][:50]
    matched = [r for r in responses if (r["connection"], r["correlation_id"]) in requests]
    assert matched, "no Produce response matched a request by connection and correlation id"
    req = requests[(matched[0]["connection"], matched[0]["correlation_id"])]
    assert req["client_id"] == "kproxy-txn-producer"
    assert req["client_software"]["name"] == "apache-kafka-java", req
    assert matched[0]["latency_ms"] > 0
    records = req["body"]["TopicData"][0]["PartitionData"][0]["Records"]
    assert records["batches"] >= 1 and records["records"] >= 1 and records["bytes"] > 0, records
    assert "tap-" not in json.dumps(req), "record contents leaked into the tap"
    api_versions = [l for l in tap.lines if l["api"] == "ApiVersions" and l["direction"] == "request"]
    assert any(l["body"].get("ClientSoftwareName") == "apache-kafka-java" for l in api_versions), api_versions[:2]

    assert produce_only.lines and all(l["api"] == "Produce" and l["direction"] == "response" for l in produce_only.lines)
    assert "Produce" in cli_text and "corr=" in cli_text, cli_text[-2000:]
    deadline = time.monotonic() + 10  # the server notices a gone reader at its next write (keep-alive)
    while _value(_scrape(kp.admin_port), "kproxy_tap_subscribers") != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _value(_scrape(kp.admin_port), "kproxy_tap_subscribers") == 0


def test_token_file_opt_in_labels_with_a_cap_and_tap_records(kafka, topic_name, tmp_path):
    token = "obs-" + os.urandom(12).hex()
    token_file = tmp_path / "admin-token"
    token_file.write_text(token + "\n")
    admin_port = kh.free_ports(1)[0]
    kafka.create_topic(topic_name, partitions=1)
    extra = (f"admin: {{ listen: 127.0.0.1:{admin_port}, token_file: {token_file} }}\n"
             "metrics: { topic_labels: true, client_id_labels: true, max_label_values: 2 }\n"
             "tap: { records: true, max_record_bytes: 16 }\n")
    with Kproxy(kafka.bootstrap(), name="obs-labels", extra_yaml=extra, log_level="info") as kp:
        kp.wait_for_log(r"bearer token required \(from file ")
        assert token not in kp.log_text()
        assert _get(admin_port, "/metrics")[0] == 401
        assert _get(admin_port, "/metrics", token=token + "x")[0] == 401
        assert _get(admin_port, "/metrics", token=token[:-1])[0] == 401
        tap = _TapReader(admin_port, "?api=Produce&direction=request", token=token)
        tap.start()
        assert tap.connected.wait(10)

        # Three client ids, a cap of two: the third is folded into "other".
        for cid in ("obs-a", "obs-b", "obs-c"):
            out = clients.rd_produce(kp.bootstrap, topic_name, 5, key_prefix=f"{cid}-key-", conf={"client.id": cid})
            assert out["delivered"] == 5 and not out["errors"], out
        # Java's Fetch v17 names the topic by id only: kproxy names it from the Metadata it forwarded.
        read = clients.read_committed(kp.bootstrap, topic_name, 15, timeout_ms=30000)
        assert read["ok"] and read["count"] == 15, read
        time.sleep(0.5)
        tap.stop()

        text = _scrape(admin_port, token)
        produce = _value(text, "kproxy_requests_total", api="Produce")
        assert produce >= 3
        # Each Produce names the one topic: the topic series counts every Produce exactly once.
        assert _value(text, "kproxy_topic_requests_total", api="Produce", topic=topic_name) == produce
        assert _value(text, "kproxy_topic_requests_total", api="Fetch", topic=topic_name) > 0
        assert _value(text, "kproxy_topic_requests_total", topic="unknown_topic_id") == 0
        client_ids = {l["client_id"] for n, l, v in _samples(text) if n == "kproxy_client_requests_total"}
        assert client_ids == {"obs-a", "obs-b", "other"}, client_ids
        other = _value(text, "kproxy_client_requests_total", client_id="other")
        assert other > 0
        assert _value(text, "kproxy_label_values_folded_total", label="client_id") == other
        # Every request is counted under exactly one client id series.
        assert _value(text, "kproxy_client_requests_total") == _value(text, "kproxy_requests_total")

        shown = []
        for line in tap.lines:
            for t in line["body"]["TopicData"]:
                for p in t["PartitionData"]:
                    for b in (p["Records"] or {}).get("batch_list", []):
                        shown += b.get("records", [])
        keys = {r["key"]["text"] for r in shown if r.get("key")}
        assert {"obs-a-key-0", "obs-c-key-4"} <= keys, sorted(keys)[:20]
        assert all(r["value"]["size"] == len(r["key"]["text"]) + 3 for r in shown if r.get("key")), shown[:3]


def _api_versions_v0(correlation_id: int) -> bytes:
    client_id = b"close-reason-test"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n):
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"closed after {len(out)} of {n} bytes")
            out += chunk
        return out
    size = struct.unpack(">i", exactly(4))[0]
    return exactly(size)


def _wait_for_value(port: int, name: str, want: float, **labels) -> float:
    deadline = time.monotonic() + 30
    got = None
    while time.monotonic() < deadline:
        got = _value(_scrape(port), name, **labels)
        if got >= want:
            return got
        time.sleep(0.1)
    return got


def test_close_reason_labels_for_a_client_close_and_a_broker_close(observed_kproxy):
    """kproxy_connections_closed_total{reason} comes from the close's category: an ordinary client
    disconnect is client_closed (it was once counted as upstream_connect_failed), a real broker
    closing the connection (Kafka closes a connection whose request names an api key it does not
    know) is broker_closed."""
    kp = observed_kproxy
    closed = "kproxy_connections_closed_total"
    # The fixture's readiness probe (and an earlier test's clients) may still be closing: start
    # from a scrape with no client connection open, so each close below is the only new one.
    deadline = time.monotonic() + 15
    before = _scrape(kp.admin_port)
    while _value(before, "kproxy_connections", side="client") > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
        before = _scrape(kp.admin_port)
    assert _value(before, "kproxy_connections", side="client") == 0, "client connections still open before the test"
    base = {r: _value(before, closed, reason=r) for r in ("client_closed", "broker_closed", "upstream_connect_failed")}
    with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
        s.sendall(_api_versions_v0(1))
        answer = _read_frame(s)
        assert struct.unpack(">i", answer[:4])[0] == 1
    assert _wait_for_value(kp.admin_port, closed, base["client_closed"] + 1, reason="client_closed") == base["client_closed"] + 1

    with socket.create_connection(("127.0.0.1", kp.port), timeout=10) as s:
        s.sendall(_api_versions_v0(1))
        _read_frame(s)  # the upstream connection is up
        body = struct.pack(">hhih", 9999, 0, 2, 1) + b"x"
        s.sendall(struct.pack(">i", len(body)) + body)
        assert s.recv(1) == b"", "kproxy closes the client after the broker closed"
    assert _wait_for_value(kp.admin_port, closed, base["broker_closed"] + 1, reason="broker_closed") == base["broker_closed"] + 1
    text = _scrape(kp.admin_port)
    assert _value(text, closed, reason="client_closed") == base["client_closed"] + 1
    assert _value(text, closed, reason="upstream_connect_failed") == base["upstream_connect_failed"] == 0
