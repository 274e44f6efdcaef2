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

from contract import Account, CtpProgress, Deadline, GiveUp, close_bounded, finish, logger, parse_args, \
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
        if a.mode == "ctp":
            run_ctp(a, p, res, deadline, note, abort)
            raise StopIteration
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
    except StopIteration:
        pass
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


def run_ctp(a, p, res, deadline, note, abort):
    """Consume-transform-produce (CONTRACT.md): a read_committed KafkaConsumer in group --group;
    each poll (at most M records) is one transaction: one output per input (in the input's
    partition number when the output topic has it), send_offsets_to_transaction(next offsets,
    consumer.group_metadata()), commit_transaction(); errors as in produce mode (fatal: give up;
    else abort and rewind the consumer to the group's committed offsets)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    want = a.transactions * a.records_per_txn
    prog = CtpProgress(res, a.run_id, a.records_per_txn)
    c = KafkaConsumer(a.input_topic, bootstrap_servers=a.bootstrap, group_id=a.group,
                      client_id=(a.client_id or f"conformance-{FAMILY}") + "-consumer",
                      isolation_level="read_committed", enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        out_parts = len(p.partitions_for(a.topic) or [0])
        n = 0
        while prog.records < want:
            deadline.check()
            batch = c.poll(timeout_ms=500, max_records=a.records_per_txn)
            msgs = [m for recs in batch.values() for m in recs]
            if not msgs:
                continue
            index, n = n, n + 1
            try:
                p.begin_transaction()
            except Exception as exc:  # noqa: BLE001
                raise GiveUp(f"begin_transaction failed: {note(exc, 'begin_transaction')}")
            keys = [m.key.decode() for m in msgs]
            firsts = {}
            for m in msgs:
                firsts[m.partition] = min(firsts.get(m.partition, m.offset), m.offset)
            try:
                offsets = {}
                for m, k in zip(msgs, keys):
                    out = prog.output_key(k)
                    p.send(a.topic, key=out.encode(), value=out.encode(),
                           partition=m.partition if m.partition < out_parts else None)
                    tp = TopicPartition(m.topic, m.partition)
                    offsets[tp] = OffsetAndMetadata(max(m.offset + 1, offsets[tp].offset if tp in offsets else 0), "", -1)
                p.send_offsets_to_transaction(offsets, c.group_metadata())
                p.commit_transaction()
                prog.committed(keys)
                log(f"ctp txn {index} committed ({len(msgs)} records, {prog.records}/{want})")
            except GiveUp:
                raise
            except FATAL as exc:
                raise GiveUp(f"fatal {note(exc, 'transaction')}: {exc}")
            except Exception as exc:  # noqa: BLE001 - abort, rewind, go on
                name = note(exc, "transaction")
                try:
                    p.abort_transaction()
                except Exception as exc2:  # noqa: BLE001
                    raise GiveUp(f"abort_transaction failed ({note(exc2, 'abort_transaction')}) after {name}")
                # Back to the committed offsets: every earlier chunk committed, so they are this
                # chunk's first offsets (an explicit seek; seek_to_beginning() is lazy).
                for q, first in sorted(firsts.items()):
                    c.seek(TopicPartition(a.input_topic, q), first)
                log(f"ctp txn {index} aborted after {name}; rewound to {firsts}")
    finally:
        c.close(autocommit=False)


if __name__ == "__main__":
    main()
