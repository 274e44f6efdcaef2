"""Transactional workload driver for aiokafka. See ../CONTRACT.md.

Error handling follows aiokafka's own transaction context manager (`producer.transaction()`),
written out as explicit calls so each outcome can be recorded: an exception inside the
transaction -> abort_transaction(), unless the producer is in its fatal state (aiokafka's
ProducerFenced and friends), in which case the producer is closed and the driver gives up.
commit_transaction() only fails with the transaction's abortable or fatal error (aiokafka retries
EndTxn internally): abortable -> abort ("aborted"); fatal -> give up ("unknown"). A failed abort
-> give up. The fatal test is the one the context manager uses: `_txn_manager.is_fatal_error()`.
"""
import asyncio

import aiokafka
import aiokafka.errors as AE
from aiokafka import AIOKafkaProducer

from contract import Account, CtpProgress, Deadline, GiveUp, finish, logger, parse_args, record_key, \
    start_watchdog

FAMILY = "aiokafka"
log = logger(FAMILY)


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
        if a.mode == "ctp":
            await run_ctp(a, p, res, deadline, note, fatal)
        for i in range(a.transactions if a.mode == "produce" else 0):
            deadline.check()
            try:
                await p.begin_transaction()
            except Exception as exc:  # noqa: BLE001
                raise GiveUp(f"begin_transaction failed: {note('begin_transaction', exc)}")
            stage = "send"
            try:
                futs = []
                for j in range(a.records_per_txn):
                    k = record_key(a.run_id, i, j)
                    futs.append(await p.send(a.topic, key=k, value=k))
                for f in futs:
                    await f
                deadline.check()
                stage = "commit"
                res.begin_commit(i)
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


async def run_ctp(a, p, res, deadline, note, fatal):
    """Consume-transform-produce (CONTRACT.md): a read_committed AIOKafkaConsumer in group --group;
    each getmany (at most M records) is one transaction: one output per input (in the input's
    partition number when the output topic has it), send_offsets_to_transaction(next offsets,
    group id), commit_transaction(); errors as in produce mode (fatal: give up; else abort and
    rewind to the group's committed offsets)."""
    from aiokafka import AIOKafkaConsumer
    want = a.transactions * a.records_per_txn
    prog = CtpProgress(res, a.run_id, a.records_per_txn)
    c = AIOKafkaConsumer(a.input_topic, bootstrap_servers=a.bootstrap, group_id=a.group,
                         client_id=(a.client_id or f"conformance-{FAMILY}") + "-consumer",
                         isolation_level="read_committed", enable_auto_commit=False, auto_offset_reset="earliest")
    await c.start()
    try:
        out_parts = len(await p.partitions_for(a.topic) or [0])
        n = 0
        while prog.records < want:
            deadline.check()
            batch = await c.getmany(timeout_ms=500, max_records=a.records_per_txn)
            msgs = [m for recs in batch.values() for m in recs]
            if not msgs:
                continue
            index, n = n, n + 1
            try:
                await p.begin_transaction()
            except Exception as exc:  # noqa: BLE001
                raise GiveUp(f"begin_transaction failed: {note('begin_transaction', exc)}")
            keys = [m.key.decode() for m in msgs]
            firsts = {}
            for m in msgs:
                tp = aiokafka.TopicPartition(m.topic, m.partition)
                firsts[tp] = min(firsts.get(tp, m.offset), m.offset)
            stage = "send"
            try:
                offsets, futs = {}, []
                for m, k in zip(msgs, keys):
                    out = prog.output_key(k).encode()
                    futs.append(await p.send(a.topic, key=out, value=out,
                                             partition=m.partition if m.partition < out_parts else None))
                    tp = aiokafka.TopicPartition(m.topic, m.partition)
                    offsets[tp] = max(m.offset + 1, offsets.get(tp, 0))
                for f in futs:
                    await f
                stage = "send_offsets"
                await p.send_offsets_to_transaction(offsets, a.group)
                stage = "commit"
                await p.commit_transaction()
                prog.committed(keys)
                log(f"ctp txn {index} committed ({len(msgs)} records, {prog.records}/{want})")
            except GiveUp:
                raise
            except Exception as exc:  # noqa: BLE001
                name = note(stage, exc)
                if fatal():
                    raise GiveUp(f"fatal {name} in {stage}")
                try:
                    await p.abort_transaction()
                except Exception as exc2:  # noqa: BLE001
                    raise GiveUp(f"abort_transaction failed ({note('abort_transaction', exc2)}) after {name}")
                # Back to the committed offsets: every earlier chunk committed, so they are this
                # chunk's first offsets.
                for tp, first in firsts.items():
                    c.seek(tp, first)
                log(f"ctp txn {index} aborted after {name}; rewound")
    finally:
        await asyncio.wait_for(c.stop(), timeout=10)


def main():
    a = parse_args()
    deadline = Deadline(a.timeout_s)
    res = Account(FAMILY, aiokafka.__version__, aiokafka.__version__, a, deadline.t0)
    start_watchdog(res, deadline, log)
    asyncio.run(run(a, res, deadline))
    finish()


if __name__ == "__main__":
    main()
