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

from contract import Account, CtpProgress, Deadline, GiveUp, close_bounded, finish, logger, parse_args, properties, \
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
    conf.update(properties(a))   # --property key=value: any other librdkafka setting

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

    if a.mode == "ctp":
        return run_ctp(a, p, conf, res, deadline, call, handle, on_delivery)

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


def run_ctp(a, p, conf, res, deadline, call, handle, on_delivery):
    """Consume-transform-produce (CONTRACT.md): a read_committed consumer in group --group reads
    --input-topic; each consume() of at most M records is one transaction writing one output per
    input (in the input's partition number when the output topic has it), then
    send_offsets_to_transaction(the next offset per partition, consumer_group_metadata()) and
    commit_transaction(), errors handled as for commit (retriable: again; txn_requires_abort:
    abort_transaction() and rewind the consumer to the group's committed offsets; else fatal).
    Stops when N x M inputs went out in committed transactions."""
    want = a.transactions * a.records_per_txn
    prog = CtpProgress(res, a.run_id, a.records_per_txn)
    consumer = ck.Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group, "client.id": conf["client.id"] + "-consumer",
                            "isolation.level": "read_committed", "enable.auto.commit": False,
                            "auto.offset.reset": "earliest"})
    consumer.subscribe([a.input_topic])
    reason, n = None, 0

    def rewind():
        parts = consumer.assignment()
        for tp in consumer.committed(parts, timeout=max(0.1, min(deadline.remaining(), 10.0))):
            try:
                consumer.seek(ck.TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else ck.OFFSET_BEGINNING))
            except KafkaException as exc:
                log("seek:", exc)

    try:
        if call("init_transactions", p.init_transactions) != "ok":
            raise GiveUp("init_transactions requires abort")
        out_parts = len(p.list_topics(a.topic, timeout=10).topics[a.topic].partitions)
        while prog.records < want:
            deadline.check()
            msgs = [m for m in consumer.consume(num_messages=a.records_per_txn, timeout=0.5) if m.error() is None]
            if not msgs:
                continue
            index, n = n, n + 1
            try:
                p.begin_transaction()
            except KafkaException as exc:
                handle(exc, "begin_transaction")
                raise GiveUp("begin_transaction failed")
            offsets = {}
            for m in msgs:
                k = m.key().decode()
                part = m.partition() if m.partition() < out_parts else -1
                p.produce(a.topic, key=prog.output_key(k), value=prog.output_key(k), partition=part, on_delivery=on_delivery)
                offsets[m.partition()] = max(offsets.get(m.partition(), -1), m.offset() + 1)
            tps = [ck.TopicPartition(a.input_topic, q, o) for q, o in sorted(offsets.items())]
            r = call("send_offsets_to_transaction",
                     lambda t: p.send_offsets_to_transaction(tps, consumer.consumer_group_metadata(), t))
            if r == "ok":
                r = call("commit_transaction", p.commit_transaction)
            if r == "ok":
                prog.committed([m.key().decode() for m in msgs])
                log(f"ctp txn {index} committed ({len(msgs)} records, {prog.records}/{want})")
            else:
                if call("abort_transaction", p.abort_transaction) != "ok":
                    raise GiveUp("abort_transaction failed with an abortable error")
                log(f"ctp txn {index} aborted; rewinding to the committed offsets")
                rewind()
    except GiveUp as g:
        reason = str(g)
        log("giving up:", reason)
    res.emit(reason)
    close_bounded(lambda: (consumer.close(), p.flush(0)), deadline, log)
    finish()


if __name__ == "__main__":
    main()
