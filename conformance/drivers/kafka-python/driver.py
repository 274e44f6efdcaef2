"""Transactional workload driver for kafka-python. See ../CONTRACT.md.

kafka-python's transactional producer mirrors the Java client, whose documentation tells an
application: ProducerFenced, OutOfOrderSequence, UnsupportedVersion and authorization errors are
fatal (close the producer); any other error inside a transaction -> abort_transaction() and go on.
An abort that itself fails leaves nothing to do but close. init_transactions() may be called again
after a KafkaTimeoutError (its docstring says so). commit_transaction() has no timeout of its own:
a commit that never returns is left to the deadline watchdog and reported as "unknown".
"""
import kafka
import kafka.errors as KE
from kafka import KafkaProducer

from contract import Account, Deadline, GiveUp, close_bounded, finish, logger, parse_args, \
    record_key, start_watchdog

FAMILY = "kafka-python"
FATAL = (KE.ProducerFencedError, KE.OutOfOrderSequenceNumberError, KE.UnsupportedVersionError,
         KE.AuthorizationError, KE.IllegalStateError, KE.InvalidProducerEpochError,
         KE.TransactionCoordinatorFencedError)
log = logger(FAMILY)


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
    a = parse_args()
    deadline = Deadline(a.timeout_s)
    res = Account(FAMILY, kafka.__version__, kafka.__version__, a, deadline.t0)
    start_watchdog(res, deadline, log)

    conf = dict(bootstrap_servers=a.bootstrap, transactional_id=a.transactional_id,
                client_id=a.client_id or f"conformance-{FAMILY}", enable_idempotence=True, acks="all")
    if a.transaction_timeout_ms is not None:
        conf["transaction_timeout_ms"] = a.transaction_timeout_ms

    def on_send_error(exc):
        res.error(err_name(exc))

    p = None
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
            deadline.check()
            try:
                p.init_transactions()
                break
            except KE.KafkaTimeoutError as exc:
                note(exc, "init_transactions")
            except Exception as exc:  # noqa: BLE001
                raise GiveUp(f"init_transactions failed: {note(exc, 'init_transactions')}")
        for i in range(a.transactions):
            deadline.check()
            try:
                p.begin_transaction()
            except Exception as exc:  # noqa: BLE001
                raise GiveUp(f"begin_transaction failed: {note(exc, 'begin_transaction')}")
            try:
                for j in range(a.records_per_txn):
                    k = record_key(a.run_id, i, j)
                    p.send(a.topic, key=k, value=k).add_errback(on_send_error)
                deadline.check()
                res.begin_commit(i)
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
                abort(i, name)
    except GiveUp as g:
        reason = str(g)
        log("giving up:", reason)
    except Exception as exc:  # noqa: BLE001 - e.g. the producer constructor
        reason = f"{err_name(exc)}: {exc}"
        res.error(err_name(exc))
        log("giving up:", reason)
    res.emit(reason)
    if p is not None:
        close_bounded(lambda: p.close(timeout=5), deadline, log)
    finish()


if __name__ == "__main__":
    main()
