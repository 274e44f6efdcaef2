"""Transactional workload driver for confluent-kafka-python (librdkafka). See ../CONTRACT.md.

Error handling follows the confluent-kafka / librdkafka transactional API documentation:
  * a KafkaError with fatal() set: the producer is unusable -> close, give up;
  * txn_requires_abort(): abort_transaction() and go on with the next transaction;
  * retriable() on commit_transaction()/abort_transaction()/init_transactions(): call it again
    (a commit that timed out is "unknown" until the retry tells).
"""
import time

import confluent_kafka as ck
from confluent_kafka import KafkaError, KafkaException

from contract import Account, Deadline, GiveUp, close_bounded, finish, logger, parse_args, \
    record_key, start_watchdog

FAMILY = "confluent-kafka-python"
log = logger(FAMILY)


def err_of(exc):
    """The KafkaError inside a KafkaException (or None)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def main():
    a = parse_args()
    deadline = Deadline(a.timeout_s)
    v = ck.version()
    res = Account(FAMILY, v[0] if isinstance(v, tuple) else str(v), "librdkafka " + ck.libversion()[0],
                  a, deadline.t0)
    # Hard bound: if a blocking call overstays the deadline by more than a few seconds,
    # print the JSON as it stands and leave.
    start_watchdog(res, deadline, log)

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

    def on_delivery(err, _msg):
        if err is not None:
            res.error(err.name())

    try:
        p = ck.Producer(conf)
    except Exception as exc:  # noqa: BLE001 - e.g. a configuration the client refuses
        e = err_of(exc)
        res.error(e.name() if e is not None else type(exc).__name__)
        log("Producer():", exc)
        res.emit(f"producer could not be created: {exc}")
        finish()
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
            deadline.check()
            try:
                fn(max(0.1, min(deadline.remaining(), 30.0)))
                return "ok"
            except KafkaException as exc:
                verdict = handle(exc, where)
                if verdict == "abort":
                    return "abort"
                if where == "commit_transaction" and current is not None:
                    res.settle(current, "unknown")  # until the retry tells
                time.sleep(0.1)

    def abort_current():
        r = call("abort_transaction", p.abort_transaction)
        if r == "abort":  # abort itself never asks for an abort; treat as fatal
            raise GiveUp("abort_transaction failed with an abortable error")
        res.settle(current, "aborted")

    reason = None
    try:
        if call("init_transactions", p.init_transactions) != "ok":
            raise GiveUp("init_transactions requires abort")
        for i in range(a.transactions):
            deadline.check()
            current, commit_requested = i, False
            try:
                p.begin_transaction()
            except KafkaException as exc:
                handle(exc, "begin_transaction")
                raise GiveUp("begin_transaction failed")
            try:
                for j in range(a.records_per_txn):
                    k = record_key(a.run_id, i, j)
                    while True:
                        try:
                            p.produce(a.topic, key=k, value=k, on_delivery=on_delivery)
                            break
                        except BufferError:  # local queue full: serve delivery reports, retry
                            p.poll(0.1)
                            deadline.check()
                    p.poll(0)
            except KafkaException as exc:
                if handle(exc, "produce") == "abort":
                    abort_current()
                    continue
                raise GiveUp("produce failed")
            # commit_transaction flushes outstanding messages itself.
            commit_requested = True
            res.begin_commit(i)
            r = call("commit_transaction", p.commit_transaction)
            res.committing = None
            if r == "ok":
                res.settle(i, "committed")
            else:
                abort_current()
            current = None
    except GiveUp as g:
        reason = str(g)
        log("giving up:", reason)
        if current is not None and commit_requested and res.unsettled(current):
            res.settle(current, "unknown")
    res.emit(reason)
    # Close the producer, bounded: a close that hangs must not hold the run past the watchdog.
    close_bounded(lambda: p.close() if hasattr(p, "close") else p.flush(0), deadline, log)
    finish()


if __name__ == "__main__":
    main()
