'use strict'
// Transactional workload driver for @confluentinc/kafka-javascript (librdkafka underneath), through
// the library's librdkafka-level API (`Producer` with initTransactions / beginTransaction /
// produce / commitTransaction / abortTransaction), whose errors are librdkafka's own
// (`LibrdKafkaError` with `isFatal`, `isRetriable`, `isTxnRequiresAbort`). See ../CONTRACT.md.
//
// Not the KafkaJS-compatible API: in 1.10.1 its errors copy `.fatal/.retriable/.abortable` from a
// librdkafka error that names them `isFatal/isRetriable/isTxnRequiresAbort`, so every flag reads
// false (FINDINGS.md); a driver on that layer cannot follow the documented handling.
//
// Error handling as librdkafka documents it for the transactional producer (rdkafka.h,
// rd_kafka_commit_transaction and friends; the same as confluent-kafka-python's driver):
//   isFatal -> disconnect, give up ("fatal <NAME> in <call>");
//   isTxnRequiresAbort -> abortTransaction() and go on ("aborted");
//   isRetriable -> call it again (a commit is "unknown" until the retry tells);
//   anything else -> give up ("<NAME> in <call> (not retriable, not abortable)").
const util = require('util')
// The library logs through console.*; stdout is kept for the JSON line.
for (const m of ['log', 'info', 'warn', 'debug', 'error']) {
  console[m] = (...a) => process.stderr.write(util.format(...a) + '\n')
}
const ckjs = require('@confluentinc/kafka-javascript')
const version = require('@confluentinc/kafka-javascript/package.json').version

const { parseArgs, logger, recordKey, sleep, Account, CtpProgress, runMain } = require('../common-js/contract.js')

const FAMILY = 'confluent-kafka-javascript'
const log = logger(FAMILY)

// librdkafka's error name, as confluent-kafka-python's KafkaError.name() gives it: the code's
// name in LibrdKafkaError.codes without its "ERR_" ("ERR__FENCED" -> "_FENCED").
const CODE_NAMES = {}
for (const [n, c] of Object.entries(ckjs.CODES.ERRORS)) if (!(c in CODE_NAMES)) CODE_NAMES[c] = n
function errName (e) {
  if (e && typeof e.code === 'number' && CODE_NAMES[e.code]) return CODE_NAMES[e.code].replace(/^ERR_/, '')
  return (e && e.name) || typeof e
}

class GiveUp extends Error {}

// A callback API call as a promise; rejects with the LibrdKafkaError.
const call = (fn) => new Promise((resolve, reject) => fn((err) => (err ? reject(err) : resolve())))

async function main () {
  const a = parseArgs(FAMILY, process.argv.slice(2))
  const res = new Account(FAMILY, version, `librdkafka ${ckjs.librdkafkaVersion}`, a)
  res.startWatchdog(log)

  const conf = {
    'bootstrap.servers': a.bootstrap,
    'client.id': a.clientId || `conformance-${FAMILY}`,
    'transactional.id': a.transactionalId,
    'enable.idempotence': true,
    acks: -1,
    dr_cb: true
  }
  if (a.transactionTimeoutMs !== undefined) conf['transaction.timeout.ms'] = a.transactionTimeoutMs
  const producer = new ckjs.Producer(conf)
  producer.on('event.error', (e) => {
    log(`error event: ${errName(e)} fatal=${e && e.isFatal}: ${e && e.message}`)
    if (e && e.isFatal) res.countErr(errName(e))
  })
  producer.on('delivery-report', (err) => { if (err) res.countErr(errName(err)) })

  const note = (where, e) => {
    const name = errName(e)
    res.countErr(name)
    log(`${where}: ${name} isFatal=${e && e.isFatal} isTxnRequiresAbort=${e && e.isTxnRequiresAbort} ` +
        `isRetriable=${e && e.isRetriable}: ${e && e.message}`)
    return name
  }
  // The librdkafka calls block up to their timeout: bounded by the time left (at most 30 s each).
  const budget = () => Math.max(100, Math.min(res.deadlineMs - Date.now(), 30000))
  // One transactional call, retried while retriable: 'ok' or 'abort'; GiveUp when fatal or neither.
  const txnCall = async (where, fn, onRetry) => {
    for (;;) {
      if (res.pastDeadline()) throw new GiveUp('deadline')
      try {
        await call(fn)
        return 'ok'
      } catch (e) {
        const name = note(where, e)
        if (e && e.isFatal) throw new GiveUp(`fatal ${name} in ${where}: ${e.message}`)
        if (e && e.isTxnRequiresAbort) return 'abort'
        if (!(e && e.isRetriable)) throw new GiveUp(`${name} in ${where} (not retriable, not abortable): ${e && e.message}`)
        if (onRetry) onRetry()
        await sleep(100)
      }
    }
  }
  const abort = async (i) => {
    if (await txnCall('abortTransaction', (cb) => producer.abortTransaction(budget(), cb)) === 'abort') {
      throw new GiveUp('abortTransaction failed with an abortable error')
    }
    res.settle(i, 'aborted')
  }

  let reason = null
  try {
    await new Promise((resolve, reject) => {
      producer.connect({ timeout: budget() }, (err) => (err ? reject(err) : resolve()))
    })
    producer.setPollInterval(50)
    if (await txnCall('initTransactions', (cb) => producer.initTransactions(budget(), cb)) !== 'ok') {
      throw new GiveUp('initTransactions requires abort')
    }
    if (a.mode === 'ctp') await runCtp(a, conf, producer, res, txnCall, abort, note, budget)
    for (let i = 0; i < (a.mode === 'ctp' ? 0 : a.transactions); i++) {
      if (res.pastDeadline()) throw new GiveUp('deadline')
      try {
        await call((cb) => producer.beginTransaction(cb))
      } catch (e) {
        const name = note('beginTransaction', e)
        throw new GiveUp(`${e && e.isFatal ? 'fatal ' : ''}${name} in beginTransaction: ${e && e.message}`)
      }
      let failed = null
      for (let j = 0; j < a.recordsPerTxn && !failed; j++) {
        const k = recordKey(a.runId, i, j)
        for (;;) {
          try {
            producer.produce(a.topic, null, Buffer.from(k), Buffer.from(k))
            break
          } catch (e) {
            if (e && e.code === ckjs.CODES.ERRORS.ERR__QUEUE_FULL && !res.pastDeadline()) { await sleep(50); continue }
            failed = e
            break
          }
        }
      }
      if (failed) {
        const name = note('produce', failed)
        if (failed.isFatal) throw new GiveUp(`fatal ${name} in produce: ${failed.message}`)
        await abort(i) // produce() refused a record: abort the transaction, as for an abortable error
        continue
      }
      if (res.pastDeadline()) throw new GiveUp('deadline')
      // commitTransaction flushes the transaction's records first.
      res.beginCommit(i)
      const r = await txnCall('commitTransaction', (cb) => producer.commitTransaction(budget(), cb),
        () => res.settle(i, 'unknown'))
      if (r === 'ok') {
        res.settle(i, 'committed')
      } else {
        res.committing = null
        await abort(i)
      }
    }
  } catch (e) {
    if (e instanceof GiveUp) reason = e.message
    else reason = `${note('producer', e)}: ${e && e.message}`
  }
  if (reason) log(`giving up: ${reason}`)
  res.emit(reason)
  await res.closeAndExit(() => new Promise((resolve) => producer.disconnect(5000, () => resolve())), log)
}

// Consume-transform-produce (CONTRACT.md): a read_committed KafkaConsumer in group --group;
// each consume(M) is one transaction: one output per input (in the input's partition number when
// the output topic has it), sendOffsetsToTransaction(next offsets, consumer), commitTransaction;
// errors as in produce mode; after an abort, seek back to the group's committed offsets.
async function runCtp (a, conf, producer, res, txnCall, abort, note, budget) {
  const want = a.transactions * a.recordsPerTxn
  const prog = new CtpProgress(res, a.runId, a.recordsPerTxn)
  const consumer = new ckjs.KafkaConsumer({
    'bootstrap.servers': a.bootstrap,
    'group.id': a.group,
    'client.id': conf['client.id'] + '-consumer',
    'isolation.level': 'read_committed',
    'enable.auto.commit': false
  }, { 'auto.offset.reset': 'earliest' })
  await new Promise((resolve, reject) => consumer.connect({ timeout: budget() }, (err) => (err ? reject(err) : resolve())))
  consumer.setDefaultConsumeTimeout(500)
  consumer.subscribe([a.inputTopic])
  const meta = await new Promise((resolve, reject) => producer.getMetadata({ topic: a.topic, timeout: 10000 },
    (err, m) => (err ? reject(err) : resolve(m))))
  const outParts = ((meta.topics.find((t) => t.name === a.topic) || {}).partitions || [0]).length
  let n = 0
  try {
    while (prog.records < want) {
      if (res.pastDeadline()) throw new GiveUp('deadline')
      const msgs = await new Promise((resolve, reject) => consumer.consume(a.recordsPerTxn, (err, m) => (err ? reject(err) : resolve(m))))
      if (!msgs.length) continue
      const index = n++
      try {
        await call((cb) => producer.beginTransaction(cb))
      } catch (e) {
        const name = note('beginTransaction', e)
        throw new GiveUp(`${e && e.isFatal ? 'fatal ' : ''}${name} in beginTransaction: ${e && e.message}`)
      }
      const offsets = {}
      const keys = msgs.map((m) => m.key.toString())
      msgs.forEach((m, k) => {
        const out = Buffer.from(prog.outputKey(keys[k]))
        producer.produce(a.topic, m.partition < outParts ? m.partition : null, out, out)
        offsets[m.partition] = Math.max(offsets[m.partition] || 0, m.offset + 1)
      })
      const tps = Object.entries(offsets).map(([p, o]) => ({ topic: a.inputTopic, partition: Number(p), offset: o }))
      let r = await txnCall('sendOffsetsToTransaction', (cb) => producer.sendOffsetsToTransaction(tps, consumer, budget(), cb))
      if (r === 'ok') r = await txnCall('commitTransaction', (cb) => producer.commitTransaction(budget(), cb))
      if (r === 'ok') {
        prog.committed(keys)
        log(`ctp txn ${index} committed (${msgs.length} records, ${prog.records}/${want})`)
        continue
      }
      if (await txnCall('abortTransaction', (cb) => producer.abortTransaction(budget(), cb)) === 'abort') {
        throw new GiveUp('abortTransaction failed with an abortable error')
      }
      const committed = await new Promise((resolve, reject) => consumer.committed(consumer.assignments(), 10000,
        (err, c) => (err ? reject(err) : resolve(c))))
      for (const tp of committed) {
        await new Promise((resolve) => consumer.seek({ topic: tp.topic, partition: tp.partition, offset: tp.offset >= 0 ? tp.offset : 0 }, 5000, () => resolve()))
      }
      log(`ctp txn ${index} aborted; rewound to the committed offsets`)
    }
  } finally {
    await new Promise((resolve) => consumer.disconnect(() => resolve()))
  }
}

runMain(FAMILY, main)
