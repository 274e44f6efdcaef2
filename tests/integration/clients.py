"""Test clients for kproxy's integration tests, reusable against a broker or kproxy.

* Java (the reference client, Kafka 4.4.0): programs under java/ that share Args.java (options),
  Json.java (summary line) and ClientMetrics.java. `java_classes()` compiles them all once with
  the JDK's javac into build/java-classes (again only when a source changed; a file lock keeps
  concurrent pytest runs apart), and a program runs as
  `java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' <Program> args...`.
  `run_java()` runs one and returns its JSON summary (the last stdout line) as a dict;
  `start_java()` runs one in the background.
* librdkafka through confluent_kafka (imported lazily, so the harness itself stays
  stdlib-only): `rd_produce()`, `rd_consume()`, `rd_partition_leaders()`.

Every call is bounded by a timeout; a Java client that outlives it is killed with its
process group. The timeouts (seconds, for an idle machine) are scaled by the measured machine
slowness (slowness.py); the clients' own settings (--timeout-ms, linger) are not.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

import jvm_cds
import kafka_harness as kh
import slowness

JAVA_DIR = Path(__file__).resolve().parent / "java"
CLIENT_LOG4J = JAVA_DIR / "log4j2-clients.properties"
JAVA_CLASSES = kh.REPO_ROOT / "build" / "java-classes"
# Stamp in JAVA_CLASSES: the digest of the sources its classes were compiled from.
_SOURCES_STAMP = ".sources-sha256"


class ClientError(RuntimeError):
    pass


def sasl_args(mechanism: str = "PLAIN", user: Optional[str] = None) -> List[str]:
    """Java client arguments for the harness's SASL_PLAINTEXT listener users."""
    users = kh.PLAIN_USERS if mechanism == "PLAIN" else kh.SCRAM_USERS
    user = user or next(iter(users))
    return ["--sasl-mechanism", mechanism, "--sasl-user", user, "--sasl-password", users[user]]


def javac_binary() -> str:
    """The javac next to kh.java_binary() (the same JDK), else the one on PATH."""
    sibling = Path(kh.java_binary()).resolve().parent / "javac"
    if sibling.exists():
        return str(sibling)
    found = shutil.which("javac")
    if not found:
        raise ClientError(f"javac not found next to {kh.java_binary()} or on PATH (a JDK 17 is needed)")
    return found


def java_classes() -> Path:
    """Compiles every java/*.java into JAVA_CLASSES unless it already holds the classes of these
    exact sources (content digest in a stamp file); returns JAVA_CLASSES. Serialized by a lock
    file, and each class file is replaced by rename, so a JVM already running from the directory
    never reads a half-written class."""
    sources = sorted(JAVA_DIR.glob("*.java"))
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    want = digest.hexdigest()
    stamp = JAVA_CLASSES / _SOURCES_STAMP
    JAVA_CLASSES.mkdir(parents=True, exist_ok=True)
    with open(JAVA_CLASSES.parent / "java-classes.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text().strip() == want:
            return JAVA_CLASSES
        with tempfile.TemporaryDirectory(prefix="java-classes-", dir=JAVA_CLASSES.parent) as tmp:
            cmd = [javac_binary(), "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-encoding", "UTF-8",
                   "-Xlint:all", "-d", tmp, "-cp", kh.kafka_classpath()] + [str(s) for s in sources]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
            if p.returncode != 0:
                raise ClientError(f"javac failed (rc={p.returncode}):\n{p.stdout[-4000:]}")
            for cls in Path(tmp).glob("*.class"):
                os.replace(cls, JAVA_CLASSES / cls.name)
        stamp_tmp = stamp.with_suffix(".tmp")
        stamp_tmp.write_text(want + "\n")
        os.replace(stamp_tmp, stamp)
    return JAVA_CLASSES


def java_command(program: str, args: Iterable[str]) -> List[str]:
    """The command line running java/<program>.java's main class (compiled by java_classes())."""
    if not (JAVA_DIR / f"{program}.java").exists():
        raise ClientError(f"no such Java client: {JAVA_DIR / program}.java")
    # The Kafka jars first: a class-data-sharing archive (jvm_cds.py) covers a classpath prefix of
    # jars only; the test clients' own classes (a directory) come after them.
    java, jars = kh.java_binary(), kh.kafka_classpath()
    classpath = f"{jars}{os.pathsep}{java_classes()}"
    cds = jvm_cds.options("clients", java, jars, dump_opts=["-XX:+UseSerialGC"])
    cmd = [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", *cds,
           f"-Dlog4j2.configurationFile={CLIENT_LOG4J}", "-cp", classpath, program]
    return cmd + [str(a) for a in args]


def run_java(program: str, args: Iterable[str], timeout: float = 180.0) -> Dict:
    """Runs java/<program>.java; returns its JSON summary plus _rc, _stderr, _elapsed_s."""
    cmd = java_command(program, args)
    timeout = slowness.scaled(timeout)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         preexec_fn=kh._child_setup, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
        raise ClientError(f"{program} timed out after {timeout:.0f}s\nstdout:\n{out[-2000:]}\nstderr:\n{err[-4000:]}")
    finally:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    jvm_cds.recorded("clients")
    return _summary(program, out, err, p.returncode, t0)


class JavaRun:
    """A Java client running in the background (start_java): its stdout goes to a file, so a test
    can wait for a progress line while it runs, then collect the JSON summary like run_java."""

    def __init__(self, program: str, args: Iterable[str], log_dir: Optional[Path] = None):
        cmd = java_command(program, args)
        self.program = program
        log_dir = Path(log_dir or (kh.REPO_ROOT / "build" / "test-logs" / "java"))
        log_dir.mkdir(parents=True, exist_ok=True)
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{program}-{time.monotonic_ns() % 10**6}"
        self.stdout_path = log_dir / f"{stem}.out"
        self.stderr_path = log_dir / f"{stem}.err"
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL,
                                     preexec_fn=kh._child_setup)

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def wait_for_line(self, pattern: str, timeout: float = 60.0) -> "re.Match":
        """Waits for a stdout line matching `pattern` (re.search); ClientError if the program
        exits or the time runs out first."""
        import re
        rx = re.compile(pattern)
        timeout = slowness.scaled(timeout)
        deadline = time.monotonic() + timeout
        while True:
            for line in self.stdout().splitlines():
                m = rx.search(line)
                if m:
                    return m
            if self.proc.poll() is not None:
                raise ClientError(f"{self.program} exited (rc={self.proc.returncode}) before printing /{pattern}/\n"
                                  f"stdout:\n{self.stdout()[-2000:]}\nstderr:\n{self.stderr_path.read_text(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                raise ClientError(f"{self.program} did not print /{pattern}/ within {timeout:.0f}s")
            time.sleep(0.1)

    def result(self, timeout: float = 180.0) -> Dict:
        """Waits for the program to exit (killing it after `timeout`) and returns its JSON summary
        plus _rc, _stderr, _elapsed_s (as run_java)."""
        timeout = slowness.scaled(timeout)
        try:
            self.proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            self.kill()
        jvm_cds.recorded("clients")
        out = self.stdout()
        err = self.stderr_path.read_text(errors="replace")
        if timed_out:
            raise ClientError(f"{self.program} timed out after {timeout:.0f}s\nstdout:\n{out[-2000:]}\nstderr:\n{err[-4000:]}")
        return _summary(self.program, out, err, self.proc.returncode, self.t0)

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        for f in (self._out, self._err):
            if not f.closed:
                f.close()


def start_java(program: str, args: Iterable[str], log_dir: Optional[Path] = None) -> JavaRun:
    """Starts java/<program>.java in the background (see JavaRun)."""
    return JavaRun(program, args, log_dir)


def _summary(program: str, out: str, err: str, rc: int, t0: float) -> Dict:
    """The program's JSON summary (its last stdout line that parses as a JSON object) plus _rc,
    _stderr and _elapsed_s (seconds since t0); ClientError when it printed none."""
    for line in reversed(out.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                summary = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    else:
        raise ClientError(f"{program} printed no JSON summary (rc={rc})\n"
                          f"stdout:\n{out[-2000:]}\nstderr:\n{err[-4000:]}")
    summary["_rc"] = rc
    summary["_stderr"] = err
    summary["_elapsed_s"] = round(time.monotonic() - t0, 2)
    return summary


def txn_produce(bootstrap: str, topic: str, records: int = 1000, transactions: int = 10,
                *extra: str, timeout: float = 180.0, **opts) -> Dict:
    """TxnProducer; opts become --key-with-dashes value (e.g. key_prefix='a-', abort_every=3)."""
    args = ["--bootstrap", bootstrap, "--topic", topic, "--records", records, "--transactions", transactions]
    args += _opts(opts) + list(extra)
    return run_java("TxnProducer", args, timeout)


def read_committed(bootstrap: str, topic: str, expect: int, *extra: str, timeout_ms: int = 60000,
                   timeout: Optional[float] = None, **opts) -> Dict:
    """ReadCommittedConsumer; opts as for txn_produce (group='g', isolation='read_uncommitted')."""
    args = ["--bootstrap", bootstrap, "--topic", topic, "--expect", expect, "--timeout-ms", timeout_ms]
    args += _opts(opts) + list(extra)
    return run_java("ReadCommittedConsumer", args, timeout or timeout_ms / 1000.0 + 90.0)


def read_committed_dump(bootstrap: str, topic: str, dump: Path, timeout_ms: int = 60000) -> Tuple[Dict, List[Tuple[int, int, str, str]]]:
    """Every record of `topic` a read_committed Java consumer sees from the beginning up to the
    last stable offset: (summary, [(partition, offset, key, value)])."""
    out = run_java("ReadCommittedConsumer", [
        "--bootstrap", bootstrap, "--topic", topic, "--to-end", "true", "--dump", dump,
        "--timeout-ms", timeout_ms], timeout=timeout_ms / 1000 + 60)
    if not out.get("reached_end") or out.get("error") is not None:
        raise ClientError(f"read_committed dump of {topic} failed: {out}")
    rows = []
    for line in dump.read_text().splitlines():
        part, off, key, value = line.split("\t", 3)
        rows.append((int(part), int(off), key, value))
    return out, rows


def _opts(opts: Dict) -> List[str]:
    out: List[str] = []
    for k, v in opts.items():
        if v is None:
            continue
        out += [f"--{k.replace('_', '-')}", str(v)]
    return out


# ------------------------------------------------------------------------------------------
# librdkafka (confluent_kafka)
# ------------------------------------------------------------------------------------------

def _ck():
    import confluent_kafka  # noqa: deferred so kafka_harness users need no third-party module
    return confluent_kafka


def rd_produce(bootstrap: str, topic: str, count: int, key_prefix: str = "rd-",
               conf: Optional[Dict] = None, timeout: float = 60.0) -> Dict:
    """Produces count records (key=<prefix><i>, value=<key>|rd) idempotently, waits for every
    delivery report. Returns {delivered, errors, partitions{p: n}, offsets{p: [min,max]}}.
    Stops waiting as soon as the broker refuses the SASL authentication (nothing would be
    delivered before the timeout): the refusal is in `errors`."""
    ck = _ck()
    timeout = slowness.scaled(timeout)
    auth_failed: List[str] = []

    def on_error(err):
        if err.code() == ck.KafkaError._AUTHENTICATION:
            auth_failed.append(str(err))

    c = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
         "message.timeout.ms": int(timeout * 1000), "client.id": "kproxy-rd-producer", "error_cb": on_error}
    c.update(conf or {})
    p = ck.Producer(c)
    delivered, errors = 0, []
    partitions: Dict[int, int] = {}
    offsets: Dict[int, List[int]] = {}

    def on_delivery(err, msg):
        nonlocal delivered
        if err is not None:
            errors.append(str(err))
            return
        delivered += 1
        partitions[msg.partition()] = partitions.get(msg.partition(), 0) + 1
        lo_hi = offsets.setdefault(msg.partition(), [msg.offset(), msg.offset()])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], msg.offset()), max(lo_hi[1], msg.offset())

    deadline = time.monotonic() + timeout
    for i in range(count):
        key = f"{key_prefix}{i}"
        while True:
            try:
                p.produce(topic, key=key.encode(), value=f"{key}|rd".encode(), on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.1)
                if time.monotonic() > deadline:
                    raise ClientError("librdkafka producer queue stayed full")
        p.poll(0)
    while len(p) and not auth_failed and time.monotonic() < deadline:
        p.poll(0.1)
    left = len(p)
    if auth_failed:
        p.purge()
        p.poll(0)
    errors += auth_failed
    if left:
        errors.append(f"{left} message(s) still undelivered" + (" (authentication refused)" if auth_failed else " at timeout"))
    return {"delivered": delivered, "errors": errors, "partitions": partitions, "offsets": offsets}


def rd_consume(bootstrap: str, topic: str, expect: int, key_prefix: str = "",
               isolation: str = "read_committed", group: Optional[str] = None,
               conf: Optional[Dict] = None, timeout: float = 60.0, linger: float = 1.0) -> Dict:
    """Consumes from the beginning until expect records (with key_prefix) arrived or timeout.
    Returns {count, unique_keys, duplicates, content_mismatches, partitions, errors, timed_out}."""
    ck = _ck()
    c = {"bootstrap.servers": bootstrap, "group.id": group or f"kproxy-rd-{os.getpid()}-{time.monotonic_ns()}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": isolation,
         "client.id": "kproxy-rd-consumer", "session.timeout.ms": 10000}
    c.update(conf or {})
    consumer = ck.Consumer(c)
    timeout = slowness.scaled(timeout)
    seen: Dict[str, int] = {}
    count = dups = mismatches = 0
    partitions: Dict[int, int] = {}
    errors: List[str] = []
    deadline = time.monotonic() + timeout
    linger_until = None
    timed_out = False
    try:
        consumer.subscribe([topic])
        while True:
            now = time.monotonic()
            if linger_until is not None and now >= linger_until:
                break
            if now >= deadline:
                timed_out = count < expect
                break
            msg = consumer.poll(0.2)
            if msg is not None:
                if msg.error():
                    if msg.error().code() != ck.KafkaError._PARTITION_EOF:
                        errors.append(str(msg.error()))
                else:
                    key = (msg.key() or b"").decode()
                    if key.startswith(key_prefix):
                        count += 1
                        partitions[msg.partition()] = partitions.get(msg.partition(), 0) + 1
                        seen[key] = seen.get(key, 0) + 1
                        if seen[key] > 1:
                            dups += 1
                        if not (msg.value() or b"").decode().startswith(key + "|"):
                            mismatches += 1
            if count >= expect and linger_until is None:
                linger_until = time.monotonic() + linger
    finally:
        consumer.close()
    return {"count": count, "unique_keys": len(seen), "duplicates": dups, "content_mismatches": mismatches,
            "partitions": partitions, "errors": errors, "timed_out": timed_out}


def rd_partition_leaders(bootstrap: str, topic: str, conf: Optional[Dict] = None,
                         timeout: float = 15.0) -> Dict[int, int]:
    """{partition: leader broker id} as librdkafka's AdminClient sees it."""
    ck = _ck()
    from confluent_kafka.admin import AdminClient
    c = {"bootstrap.servers": bootstrap}
    c.update(conf or {})
    md = AdminClient(c).list_topics(topic=topic, timeout=slowness.scaled(timeout))
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise ClientError(f"topic {topic} metadata error: {None if t is None else t.error}")
    return {pid: p.leader for pid, p in t.partitions.items()}


def rd_txn_produce(bootstrap: str, topic: str, records: int, transactions: int, key_prefix: str = "rdtx-",
                   abort_every: int = 0, transactional_id: Optional[str] = None,
                   conf: Optional[Dict] = None, timeout: float = 60.0, spread_partitions: bool = False,
                   abort_on_error: bool = False) -> Dict:
    """librdkafka transactional producer, same record layout as TxnProducer.java.
    Returns {records_committed, records_aborted, transactions_committed, transactions_aborted,
    errors, error_aborts, transactions}.

    As TxnProducer's options of the same names: `spread_partitions` sends transaction t's records
    to the partitions (t-1) % P .. of 1 + (t-1) % P of them (P = the topic's partition count),
    round-robin in ascending order with partition 0 last;
    `abort_on_error` aborts a transaction whose send or commit failed with an abortable error
    (a delivery error, or a commit error that requires an abort) and goes on with the next.
    `transactions` lists each one: {n, outcome, cause ("client" for abort_every, else the
    librdkafka error's name), partitions (those its records were sent to), records}."""
    ck = _ck()
    c = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id or f"kproxy-rd-txn-{time.monotonic_ns()}",
         "linger.ms": 5, "client.id": "kproxy-rd-txn-producer", "transaction.timeout.ms": 60000}
    c.update(conf or {})
    p = ck.Producer(c)
    timeout = slowness.scaled(timeout)
    errors: List[str] = []
    txn_errors: List[str] = []  # the delivery errors of the current transaction (error names)

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(str(err))
            txn_errors.append(err.name())

    p.init_transactions(timeout)
    partition_count = len(p.list_topics(topic, timeout=timeout).topics[topic].partitions) if spread_partitions else 0
    per_txn = records // transactions
    nxt = 0
    out = {"records_committed": 0, "records_aborted": 0, "transactions_committed": 0, "transactions_aborted": 0}
    error_aborts: Dict[str, int] = {}
    history: List[Dict] = []
    for t in range(1, transactions + 1):
        n = records - nxt if t == transactions else per_txn
        targets = sorted(((t - 1 + j) % partition_count for j in range((t - 1) % partition_count + 1)),
                         key=lambda x: (x == 0, x)) if spread_partitions else []
        sent_to: set = set()
        abort = bool(abort_every and t % abort_every == 0)
        cause: Optional[str] = None
        del txn_errors[:]
        p.begin_transaction()
        try:
            for i in range(n):
                key = f"{key_prefix}{nxt + i}"
                extra = {}
                if targets:
                    extra["partition"] = targets[i % len(targets)]
                    sent_to.add(extra["partition"])
                p.produce(topic, key=key.encode(), value=f"{key}|{t}|".encode(), on_delivery=on_delivery, **extra)
                p.poll(0)
            # Wait for every delivery report (flush), but with abort_on_error not past the first
            # failed record: once the transaction has failed, librdkafka may hold the rest (a
            # sequence gap waits for an epoch bump) until the abort purges them.
            deadline = time.monotonic() + timeout
            while len(p) and not (abort_on_error and txn_errors):
                if time.monotonic() > deadline:
                    raise ClientError("librdkafka transactional flush timed out")
                p.poll(0.05)
            if txn_errors and abort_on_error:
                # The first error a broker sent; when every record was failed by librdkafka itself
                # (_PURGE_QUEUE: the transaction had already failed), the transaction's own error,
                # which a commit attempt returns.
                cause = next((e for e in txn_errors if not e.startswith("_")), None)
                if cause is None:
                    try:
                        p.commit_transaction(timeout)
                    except ck.KafkaException as e:
                        cause = e.args[0].name()
                    else:
                        raise ClientError(f"librdkafka committed a transaction whose records failed: {txn_errors}")
            elif not abort:
                while True:
                    try:
                        p.commit_transaction(timeout)
                        break
                    except ck.KafkaException as e:
                        if not e.args[0].retriable():
                            raise
        except ck.KafkaException as e:
            err = e.args[0]
            if not abort_on_error or err.fatal():
                raise
            cause = txn_errors[0] if txn_errors else err.name()
        nxt += n
        if cause is not None:
            _rd_abort(ck, p, timeout)
            out["records_aborted"] += n
            out["transactions_aborted"] += 1
            error_aborts[cause] = error_aborts.get(cause, 0) + 1
        elif abort:
            _rd_abort(ck, p, timeout)
            out["records_aborted"] += n
            out["transactions_aborted"] += 1
            cause = "client"
        else:
            out["records_committed"] += n
            out["transactions_committed"] += 1
        history.append({"n": t, "outcome": "committed" if cause is None else "aborted", "cause": cause,
                        "partitions": sorted(sent_to), "records": n})
    out["errors"] = errors
    out["error_aborts"] = error_aborts
    out["transactions"] = history
    return out


def _rd_abort(ck, p, timeout: float) -> None:
    """abort_transaction, polling between tries: the abort purges the records still queued and
    waits until their delivery reports were served, which needs poll() (librdkafka: "the event
    queue must be polled ... prior to calling abort"; a timed-out abort may be called again)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            p.abort_transaction(min(1.0, max(0.1, deadline - time.monotonic())))
            return
        except ck.KafkaException as e:
            if e.args[0].code() != ck.KafkaError._TIMED_OUT or time.monotonic() > deadline:
                raise
            p.poll(0.1)
