"""Transactional workload driver for kafka-python. See ../CONTRACT.md.

kafka-python's transactional producer mirrors the Java client, whose documentation tells an
application: ProducerFenced, OutOfOrderSequence, UnsupportedVersion and authorization errors are
fatal (close the producer); any other error inside a transaction -> abort_transaction() and go on.
An abort that itself fails leaves nothing to do but close. init_transactions() may be called again
after a KafkaTimeoutError (its docstring says so). commit_transaction() has no timeout of its own:
a commit that never returns is left to the deadline watchdog and reported as "unknown".
"""
import argparse
import faulthandler
import json
import os
import sys
import threading
import time

import kafka
import kafka.errors as KE
from kafka import KafkaProducer

FAMILY = "kafka-python"
FATAL = (KE.ProducerFencedError, KE.OutOfOrderSequenceNumberError, KE.UnsupportedVersionError,
         KE.AuthorizationError, KE.IllegalStateError, KE.InvalidProducerEpochError,
         KE.TransactionCoordinatorFencedError)


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
        self.lock = threading.Lock()
        self.printed = False
        self.t0 = t0
        self.committing = None  # index whose commit was requested and not yet settled
        self.d = {
            "client": FAMILY, "version": kafka.__version__, "library": kafka.__version__,
            "transactions": a.transactions, "records_per_txn": a.records_per_txn, "run_id": a.run_id,
            "committed": [], "aborted": [], "unknown": [], "errors": {},
            "gave_up": False, "give_up_reason": None, "elapsed_s": 0.0,
        }

    def error(self, name):
        with self.lock:
            self.d["errors"][name] = self.d["errors"].get(name, 0) + 1

    def settle(self, i, outcome):
        with self.lock:
            if i in self.d["unknown"]:
                self.d["unknown"].remove(i)
            self.d[outcome].append(i)
            if self.committing == i:
                self.committing = None

    def emit(self, gave_up=None):
        with self.lock:
            if self.printed:
                return
            self.printed = True
            if self.committing is not None and self.committing not in self.d["unknown"]:
                self.d["unknown"].append(self.committing)
            if gave_up is not None:
                self.d["gave_up"], self.d["give_up_reason"] = True, gave_up
            self.d["elapsed_s"] = round(time.monotonic() - self.t0, 3)
            sys.stdout.write(json.dumps(self.d) + "\n")
            sys.stdout.flush()


class GiveUp(Exception):
    pass


def err_name(exc):
    if isinstance(exc, KE.BrokerResponseError) and getattr(exc, "message", None):
        return exc.message
    for arg in getattr(exc, "args", ()):  # KafkaError("Cannot perform send ...", last_error)
        if isinstance(arg, KE.BrokerResponseError) and getattr(arg, "message", None):
            return arg.message
        if isinstance(arg, type) and issubclass(arg, KE.BrokerResponseError):
            return arg.message
    return type(exc).__name__


def main():
    a = parse()
    t0 = time.monotonic()
    deadline = t0 + a.timeout_s
    res = Result(a, t0)

    def watchdog():
        time.sleep(max(0.0, deadline - time.monotonic()) + 5.0)
        log("watchdog: deadline passed inside a blocking call")
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)  # where it hung
        res.emit("deadline")
        os._exit(0)
    threading.Thread(target=watchdog, daemon=True).start()

    def check_deadline():
        if time.monotonic() >= deadline:
            raise GiveUp("deadline")

    conf = dict(bootstrap_servers=a.bootstrap, transactional_id=a.transactional_id,
                client_id=a.client_id or f"conformance-{FAMILY}", enable_idempotence=True, acks="all")
    if a.transaction_timeout_ms is not None:
        conf["transaction_timeout_ms"] = a.transaction_timeout_ms

    def on_send_error(exc):
        res.error(err_name(exc))

    p = None
    current = None
    reason = None

    def note(exc, where):
        name = err_name(exc)
        res.error(name)
        log(f"{where}: {name}: {type(exc).__name__}: {exc}")
        return name

    def abort(i, cause):
        try:
            p.abort_transaction()
        except Exception as exc:  # noqa: BLE001 - any failure of abort is terminal
            name = note(exc, "abort_transaction")
            raise GiveUp(f"abort_transaction failed ({name}) after {cause}")
        res.settle(i, "aborted")

    try:
        p = KafkaProducer(**conf)
        while True:  # documented: init_transactions may be called again after KafkaTimeoutError
            check_deadline()
            try:
                p.init_transactions()
                break
            except KE.KafkaTimeoutError as exc:
                note(exc, "init_transactions")
            except Exception as exc:  # noqa: BLE001
                raise GiveUp(f"init_transactions failed: {note(exc, 'init_transactions')}")
        for i in range(a.transactions):
            check_deadline()
            current = i
            try:
                p.begin_transaction()
            except Exception as exc:  # noqa: BLE001
                raise GiveUp(f"begin_transaction failed: {note(exc, 'begin_transaction')}")
            try:
                for j in range(a.records_per_txn):
                    k = f"{a.run_id}:{i}:{j}".encode()
                    p.send(a.topic, key=k, value=k).add_errback(on_send_error)
                check_deadline()
                with res.lock:
                    res.committing = i
                p.commit_transaction()
                res.settle(i, "committed")
            except GiveUp:
                raise
            except FATAL as exc:
                raise GiveUp(f"fatal {note(exc, 'transaction')}: {exc}")
            except Exception as exc:  # noqa: BLE001 - everything else: abort, go on
                name = note(exc, "transaction")
                if res.committing == i:
                    # The commit was sent and failed: until an abort succeeds, its outcome is
                    # unknown (e.g. EndTxn timed out after the broker committed).
                    res.settle(i, "unknown")
                    with res.lock:
                        res.committing = None
                abort(i, name)
            current = None
    except GiveUp as g:
        reason = str(g)
        log("giving up:", reason)
    except Exception as exc:  # noqa: BLE001 - e.g. the producer constructor
        reason = f"{err_name(exc)}: {exc}"
        res.error(err_name(exc))
        log("giving up:", reason)
    res.emit(reason)
    if p is not None:
        closer = threading.Thread(target=lambda: _close(p), daemon=True)
        closer.start()
        closer.join(timeout=max(1.0, min(10.0, deadline - time.monotonic() + 5.0)))
    os._exit(0)


def _close(p):
    try:
        p.close(timeout=5)
    except Exception as exc:  # noqa: BLE001 - best effort, the JSON is out
        log("close:", type(exc).__name__, exc)


if __name__ == "__main__":
    main()
