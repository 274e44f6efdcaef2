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

const { parseArgs, logger, recordKey, Account, runMain } = require('../common-js/contract.js')

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
    for (let i = 0; i < a.transactions; i++) {
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

runMain(FAMILY, main)
