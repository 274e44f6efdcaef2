"""Transactional workload driver for aiokafka. See ../CONTRACT.md.

Error handling follows aiokafka's own transaction context manager (`producer.transaction()`),
written out as explicit calls so each outcome can be recorded: an exception inside the
transaction -> abort_transaction(), unless the producer is in its fatal state (aiokafka's
ProducerFenced and friends), in which case the producer is closed and the driver gives up.
commit_transaction() only fails with the transaction's abortable or fatal error (aiokafka retries
EndTxn internally): abortable -> abort ("aborted"); fatal -> give up ("unknown"). A failed abort
-> give up. The fatal test is the one the context manager uses: `_txn_manager.is_fatal_error()`.
"""
import argparse
import faulthandler
import asyncio
import json
import os
import sys
import threading
import time

import aiokafka
import aiokafka.errors as AE
from aiokafka import AIOKafkaProducer

FAMILY = "aiokafka"


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
        self.committing = None
        self.d = {
            "client": FAMILY, "version": aiokafka.__version__, "library": aiokafka.__version__,
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
            if self.committing == i and outcome != "unknown":
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
    msg = getattr(exc, "message", None)
    if isinstance(exc, AE.BrokerResponseError) and isinstance(msg, str) and msg:
        return msg
    return type(exc).__name__


async def run(a, res, deadline):
    conf = dict(bootstrap_servers=a.bootstrap, transactional_id=a.transactional_id,
                client_id=a.client_id or f"conformance-{FAMILY}", enable_idempotence=True, acks="all")
    if a.transaction_timeout_ms is not None:
        conf["transaction_timeout_ms"] = a.transaction_timeout_ms
    try:
        p = AIOKafkaProducer(**conf)
    except Exception as exc:  # noqa: BLE001 - e.g. a configuration the client refuses
        res.error(err_name(exc))
        log("AIOKafkaProducer():", exc)
        res.emit(f"producer could not be created: {exc}")
        return

    def check_deadline():
        if time.monotonic() >= deadline:
            raise GiveUp("deadline")

    def note(where, exc):
        name = err_name(exc)
        res.error(name)
        log(f"{where}: {name}: {type(exc).__name__}: {exc}")
        return name

    def fatal():
        return p._txn_manager is not None and p._txn_manager.is_fatal_error()

    async def abort(i, cause):
        try:
            await p.abort_transaction()
        except Exception as exc:  # noqa: BLE001
            raise GiveUp(f"abort_transaction failed ({note('abort_transaction', exc)}) after {cause}")
        res.settle(i, "aborted")

    reason = None
    started = False
    try:
        await p.start()
        started = True
        for i in range(a.transactions):
            check_deadline()
            try:
                await p.begin_transaction()
            except Exception as exc:  # noqa: BLE001
                raise GiveUp(f"begin_transaction failed: {note('begin_transaction', exc)}")
            stage = "send"
            try:
                futs = []
                for j in range(a.records_per_txn):
                    k = f"{a.run_id}:{i}:{j}".encode()
                    futs.append(await p.send(a.topic, key=k, value=k))
                for f in futs:
                    await f
                check_deadline()
                stage = "commit"
                res.committing = i
                await p.commit_transaction()
                res.settle(i, "committed")
            except GiveUp:
                raise
            except Exception as exc:  # noqa: BLE001
                name = note(stage, exc)
                if fatal():
                    raise GiveUp(f"fatal {name} in {stage}")
                if stage == "commit":
                    res.settle(i, "unknown")  # stays unknown unless the abort succeeds
                    res.committing = None
                await abort(i, name)
    except GiveUp as g:
        reason = str(g)
    except Exception as exc:  # noqa: BLE001 - e.g. start() could not reach the cluster
        reason = f"{note('producer', exc)}: {exc}"
    if reason:
        log("giving up:", reason)
    res.emit(reason)
    if started:
        try:
            await asyncio.wait_for(p.stop(), timeout=10)
        except Exception as exc:  # noqa: BLE001 - best effort, the JSON is out
            log("stop:", type(exc).__name__, exc)


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
    asyncio.run(run(a, res, deadline))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
