"""Transactional workload driver for confluent-kafka-python (librdkafka). See ../CONTRACT.md.

Error handling follows the confluent-kafka / librdkafka transactional API documentation:
  * a KafkaError with fatal() set: the producer is unusable -> close, give up;
  * txn_requires_abort(): abort_transaction() and go on with the next transaction;
  * retriable() on commit_transaction()/abort_transaction()/init_transactions(): call it again
    (a commit that timed out is "unknown" until the retry tells).
"""
import argparse
import faulthandler
import json
import os
import sys
import threading
import time

import confluent_kafka as ck
from confluent_kafka import KafkaError, KafkaException

FAMILY = "confluent-kafka-python"


def log(*a):
    print(f"[{FAMILY}]", *a, file=sys.stderr, flush=True)


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--transactions", type=int, required=True)
    ap.add_argument("--records-per-txn", type=int, required=True)
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--client-id", default=None)
    ap.add_argument("--timeout-s", type=float, default=120.0)
    ap.add_argument("--transaction-timeout-ms", type=int, default=None)
    return ap.parse_args()


class Result:
    def __init__(self, a, t0):
        v = ck.version()
        self.lock = threading.Lock()
        self.printed = False
        self.t0 = t0
        self.committing = None  # index whose commit was requested and not yet settled
        self.d = {
            "client": FAMILY,
            "version": v[0] if isinstance(v, tuple) else str(v),
            "library": "librdkafka " + ck.libversion()[0],
            "transactions": a.transactions,
            "records_per_txn": a.records_per_txn,
            "run_id": a.run_id,
            "committed": [], "aborted": [], "unknown": [],
            "errors": {},
            "gave_up": False, "give_up_reason": None,
            "elapsed_s": 0.0,
        }

    def error(self, name):
        with self.lock:
            self.d["errors"][name] = self.d["errors"].get(name, 0) + 1

    def emit(self, gave_up=None):
        with self.lock:
            if self.printed:
                return
            self.printed = True
            if self.committing is not None and self.committing not in self.d["unknown"]:
                self.d["unknown"].append(self.committing)
            if gave_up is not None and not self.d["gave_up"]:
                self.d["gave_up"], self.d["give_up_reason"] = True, gave_up
            self.d["elapsed_s"] = round(time.monotonic() - self.t0, 3)
            sys.stdout.write(json.dumps(self.d) + "\n")
            sys.stdout.flush()


class GiveUp(Exception):
    pass


def err_of(exc):
    """The KafkaError inside a KafkaException (or None)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def main():
    a = parse()
    t0 = time.monotonic()
    deadline = t0 + a.timeout_s
    res = Result(a, t0)

    # Hard bound: if a blocking call overstays the deadline by more than a few seconds,
    # print the JSON as it stands and leave.
    def watchdog():
        time.sleep(max(0.0, deadline - time.monotonic()) + 5.0)
        log("watchdog: deadline passed inside a blocking call")
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)  # where it hung
        res.emit("deadline")
        os._exit(0)
    threading.Thread(target=watchdog, daemon=True).start()

    def remaining():
        return deadline - time.monotonic()

    def check_deadline():
        if remaining() <= 0:
            raise GiveUp("deadline")

    def on_error(err):  # global error callback: log, count fatal ones (handled at the next call)
        log("error_cb:", err)
        if err.fatal():
            res.error(err.name())

    conf = {
        "bootstrap.servers": a.bootstrap,
        "transactional.id": a.transactional_id,
        "client.id": a.client_id or f"conformance-{FAMILY}",
        "enable.idempotence": True,
        "acks": "all",
        "error_cb": on_error,
    }
    if a.transaction_timeout_ms is not None:
        conf["transaction.timeout.ms"] = a.transaction_timeout_ms

    delivery_errors = []

    def on_delivery(err, _msg):
        if err is not None:
            delivery_errors.append(err)
            res.error(err.name())

    try:
        p = ck.Producer(conf)
    except Exception as exc:  # noqa: BLE001 - e.g. a configuration the client refuses
        e = err_of(exc)
        res.error(e.name() if e is not None else type(exc).__name__)
        log("Producer():", exc)
        res.emit(f"producer could not be created: {exc}")
        os._exit(0)
    current = None          # index of the open transaction
    commit_requested = False

    def handle(exc, where):
        """Classify a transactional API exception: returns 'abort' or 'retry', raises GiveUp on fatal."""
        e = err_of(exc)
        if e is None:
            res.error(type(exc).__name__)
            log(f"{where}: {type(exc).__name__}: {exc}")
            raise GiveUp(f"{where}: {type(exc).__name__}: {exc}")
        res.error(e.name())
        log(f"{where}: {e.name()} fatal={e.fatal()} retriable={e.retriable()} "
            f"txn_requires_abort={e.txn_requires_abort()}: {e.str()}")
        if e.fatal():
            raise GiveUp(f"fatal {e.name()} in {where}: {e.str()}")
        if e.txn_requires_abort():
            return "abort"
        if e.retriable():
            return "retry"
        raise GiveUp(f"{e.name()} in {where} (not retriable, not abortable): {e.str()}")

    def call(where, fn):
        """Call a blocking transactional method with a bounded timeout; retry while retriable."""
        while True:
            check_deadline()
            try:
                fn(max(0.1, min(remaining(), 30.0)))
                return "ok"
            except KafkaException as exc:
                verdict = handle(exc, where)
                if verdict == "abort":
                    return "abort"
                if where == "commit_transaction" and current is not None and current not in res.d["unknown"]:
                    with res.lock:
                        res.d["unknown"].append(current)
                time.sleep(0.1)

    def abort_current():
        r = call("abort_transaction", p.abort_transaction)
        if r == "abort":  # abort itself never asks for an abort; treat as fatal
            raise GiveUp("abort_transaction failed with an abortable error")
        with res.lock:
            if current in res.d["unknown"]:
                res.d["unknown"].remove(current)
            res.d["aborted"].append(current)

    reason = None
    try:
        if call("init_transactions", p.init_transactions) != "ok":
            raise GiveUp("init_transactions requires abort")
        for i in range(a.transactions):
            check_deadline()
            current, commit_requested = i, False
            delivery_errors.clear()
            try:
                p.begin_transaction()
            except KafkaException as exc:
                handle(exc, "begin_transaction")
                raise GiveUp("begin_transaction failed")
            try:
                for j in range(a.records_per_txn):
                    k = f"{a.run_id}:{i}:{j}".encode()
                    while True:
                        try:
                            p.produce(a.topic, key=k, value=k, on_delivery=on_delivery)
                            break
                        except BufferError:  # local queue full: serve delivery reports, retry
                            p.poll(0.1)
                            check_deadline()
                    p.poll(0)
            except KafkaException as exc:
                if handle(exc, "produce") == "abort":
                    abort_current()
                    continue
                raise GiveUp("produce failed")
            # commit_transaction flushes outstanding messages itself.
            commit_requested = True
            res.committing = i
            r = call("commit_transaction", p.commit_transaction)
            res.committing = None
            if r == "ok":
                with res.lock:
                    if i in res.d["unknown"]:
                        res.d["unknown"].remove(i)
                    res.d["committed"].append(i)
            else:
                abort_current()
            current = None
    except GiveUp as g:
        reason = str(g)
        log("giving up:", reason)
        if current is not None and commit_requested:
            with res.lock:
                if current not in res.d["unknown"] and current not in res.d["committed"] \
                        and current not in res.d["aborted"]:
                    res.d["unknown"].append(current)
    res.emit(reason)
    # Close the producer, bounded: a close that hangs must not hold the run past the watchdog.
    closer = threading.Thread(target=lambda: _close(p), daemon=True)
    closer.start()
    closer.join(timeout=max(1.0, min(10.0, remaining() + 5.0)))
    sys.stdout.flush()
    os._exit(0)


def _close(p):
    try:
        p.close() if hasattr(p, "close") else p.flush(0)
    except Exception as exc:  # closing is best effort, the JSON is already out
        log("close:", type(exc).__name__, exc)


if __name__ == "__main__":
    main()
