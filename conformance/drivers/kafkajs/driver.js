'use strict'
// Transactional workload driver for KafkaJS. See ../CONTRACT.md.
//
// Error handling as KafkaJS documents transactions: send inside the transaction; on any error,
// transaction.abort(). KafkaJS has no fatal/abortable classification of its own, so the driver
// takes the fencing errors as fatal (the contract's rule): PRODUCER_FENCED, and
// INVALID_PRODUCER_EPOCH, which KafkaJS describes as "there is a newer producer with the same
// transactionalId" (without this, a fenced KafkaJS producer "aborts" every later transaction
// locally and never stops). A failed abort (e.g. a transaction KafkaJS already considers ended)
// leaves nothing to do but disconnect and give up. A failed commit() leaves the index "unknown"
// (KafkaJS does not say whether it committed), then abort() is attempted as the docs say.
const { Kafka, logLevel } = require('kafkajs')
const kafkajsVersion = require('kafkajs/package.json').version

const { parseArgs, logger, recordKey, sleep, Account, CtpProgress, runMain } = require('../common-js/contract.js')

const FAMILY = 'kafkajs'
const FATAL = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH'])
const log = logger(FAMILY)

// Kafka's error name where KafkaJS carries one (KafkaJSProtocolError.type), looking through
// KafkaJS's wrappers (retries exceeded, non-retriable, aggregate); else the error class name.
function errName (e) {
  const seen = new Set()
  let cur = e
  while (cur && typeof cur === 'object' && !seen.has(cur)) {
    seen.add(cur)
    if (cur.type && typeof cur.type === 'string') return cur.type
    if (Array.isArray(cur.errors) && cur.errors.length) { cur = cur.errors[0]; continue }
    cur = cur.originalError || cur.cause
  }
  return (e && e.name) || typeof e
}

async function main () {
  const a = parseArgs(FAMILY, process.argv.slice(2))
  const res = new Account(FAMILY, kafkajsVersion, kafkajsVersion, a)
  res.startWatchdog(log)

  const kafka = new Kafka({
    clientId: a.clientId,
    brokers: [a.bootstrap],
    logLevel: logLevel.WARN,
    // KafkaJS logs to stdout by default; the contract keeps stdout for the JSON line.
    logCreator: () => ({ namespace, level, label, log: entry }) => {
      const { message, ...extra } = entry
      process.stderr.write(`[kafkajs ${label}] ${namespace} ${message} ${JSON.stringify(extra)}\n`)
    }
  })
  const producerConf = { transactionalId: a.transactionalId, idempotent: true, maxInFlightRequests: 1 }
  if (a.transactionTimeoutMs !== undefined) producerConf.transactionTimeout = a.transactionTimeoutMs
  const producer = kafka.producer(producerConf)

  const note = (where, e) => {
    const name = errName(e)
    res.countErr(name)
    log(`${where}: ${name}: ${e && e.message}`)
    return name
  }

  let reason = null
  try {
    await producer.connect()
    if (a.mode === 'ctp') reason = await runCtp(a, kafka, producer, res, note)
    for (let i = 0; i < (a.mode === 'ctp' ? 0 : a.transactions); i++) {
      if (res.pastDeadline()) { reason = 'deadline'; break }
      let txn
      try {
        txn = await producer.transaction()
      } catch (e) {
        reason = `transaction() failed: ${note('transaction()', e)}`
        break
      }
      const messages = []
      for (let j = 0; j < a.recordsPerTxn; j++) {
        const k = recordKey(a.runId, i, j)
        messages.push({ key: k, value: k })
      }
      let stage = 'send'
      try {
        await txn.send({ topic: a.topic, acks: -1, messages })
        if (res.pastDeadline()) { reason = 'deadline'; break }
        stage = 'commit'
        res.beginCommit(i)
        await txn.commit()
        res.settle(i, 'committed')
      } catch (e) {
        const name = note(stage, e)
        if (stage === 'commit') res.settle(i, 'unknown')
        if (FATAL.has(name)) {
          reason = `fatal ${name} in ${stage}`
          break
        }
        try {
          await txn.abort()
          res.settle(i, 'aborted')
        } catch (e2) {
          reason = `abort failed (${note('abort', e2)}) after ${stage} error ${name}`
          break
        }
      }
    }
  } catch (e) {
    reason = `${note('producer', e)}: ${e && e.message}`
  }
  res.emit(reason)
  await res.closeAndExit(() => producer.disconnect(), log)
}

// Consume-transform-produce (CONTRACT.md), as KafkaJS documents it (transaction.sendOffsets):
// a consumer in group --group with readUncommitted false and autoCommit off; eachBatch splits a
// batch into transactions of at most M inputs: one output per input (in the input's partition
// number when the output topic has it), transaction.sendOffsets(the next offset), commit();
// errors as in produce mode; after an abort the consumer seeks back to the chunk's first input
// and leaves the batch (those inputs come again). Returns the give-up reason or null.
async function runCtp (a, kafka, producer, res, note) {
  const want = a.transactions * a.recordsPerTxn
  const prog = new CtpProgress(res, a.runId, a.recordsPerTxn)
  const admin = kafka.admin()
  await admin.connect()
  const meta = await admin.fetchTopicMetadata({ topics: [a.topic] })
  await admin.disconnect()
  const outParts = meta.topics[0].partitions.length
  const consumer = kafka.consumer({ groupId: a.group, readUncommitted: false })
  await consumer.connect()
  await consumer.subscribe({ topic: a.inputTopic, fromBeginning: true })
  let reason = null
  let n = 0
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      for (let k = 0; k < batch.messages.length && !reason && isRunning() && !isStale(); k += a.recordsPerTxn) {
        if (res.pastDeadline()) { reason = 'deadline'; return }
        const chunk = batch.messages.slice(k, k + a.recordsPerTxn)
        const keys = chunk.map((m) => m.key.toString())
        const index = n++
        let txn
        try {
          txn = await producer.transaction()
        } catch (e) {
          reason = `transaction() failed: ${note('transaction()', e)}`
          return
        }
        let stage = 'send'
        try {
          await txn.send({
            topic: a.topic,
            acks: -1,
            messages: keys.map((key) => ({ key: prog.outputKey(key), value: prog.outputKey(key), partition: batch.partition < outParts ? batch.partition : 0 }))
          })
          stage = 'sendOffsets'
          const next = (BigInt(chunk[chunk.length - 1].offset) + 1n).toString()
          await txn.sendOffsets({ consumerGroupId: a.group, topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }] })
          stage = 'commit'
          await txn.commit()
          prog.committed(keys)
          // The consumer's own position: without it KafkaJS fetches these inputs again.
          resolveOffset(chunk[chunk.length - 1].offset)
          await heartbeat()
          log(`ctp txn ${index} committed (${chunk.length} records, ${prog.records}/${want})`)
        } catch (e) {
          const name = note(stage, e)
          if (FATAL.has(name)) { reason = `fatal ${name} in ${stage}`; return }
          try {
            await txn.abort()
          } catch (e2) {
            reason = `abort failed (${note('abort', e2)}) after ${stage} error ${name}`
            return
          }
          consumer.seek({ topic: batch.topic, partition: batch.partition, offset: chunk[0].offset })
          log(`ctp txn ${index} aborted after ${name}; seek back to ${chunk[0].offset}`)
          return
        }
      }
    }
  })
  while (!reason && prog.records < want) {
    if (res.pastDeadline()) reason = 'deadline'
    else await sleep(100)
  }
  await consumer.disconnect()
  return reason
}

runMain(FAMILY, main)
