'use strict'
// Transactional workload driver for @confluentinc/kafka-javascript (librdkafka underneath), through
// its KafkaJS-compatible API. See ../CONTRACT.md.
//
// Error handling as the library documents for the transactional producer: every error carries
// librdkafka's `fatal`, `abortable` and `retriable` flags ("retriable ... applicable only for
// transactional producer, where users are expected to retry an action themselves"):
//   fatal -> disconnect, give up; abortable -> abort() and go on ("aborted");
//   retriable on commit() -> the index is "unknown", commit() again; retriable on abort() -> again;
//   anything else -> give up.
const util = require('util')
// The library logs through console.*; stdout is kept for the JSON line.
for (const m of ['log', 'info', 'warn', 'debug', 'error']) {
  console[m] = (...a) => process.stderr.write(util.format(...a) + '\n')
}
const ckjs = require('@confluentinc/kafka-javascript')
const { Kafka, logLevel } = ckjs.KafkaJS
const version = require('@confluentinc/kafka-javascript/package.json').version

const { parseArgs, logger, recordKey, sleep, Account, runMain } = require('../common-js/contract.js')

const FAMILY = 'confluent-kafka-javascript'
const log = logger(FAMILY)

// librdkafka's error name, as confluent-kafka-python's KafkaError.name() gives it:
// the library's type "ERR__FENCED" -> "_FENCED", "ERR_CONCURRENT_TRANSACTIONS" -> "CONCURRENT_TRANSACTIONS".
function errName (e) {
  if (e && typeof e.type === 'string' && e.type.startsWith('ERR_')) return e.type.slice(4)
  return (e && e.name) || typeof e
}

class GiveUp extends Error {}

async function main () {
  const a = parseArgs(FAMILY, process.argv.slice(2))
  const res = new Account(FAMILY, version, `librdkafka ${ckjs.librdkafkaVersion}`, a)
  res.startWatchdog(log)

  const kafka = new Kafka({ kafkaJS: { clientId: a.clientId, brokers: [a.bootstrap], logLevel: logLevel.WARN } })
  const pconf = { transactionalId: a.transactionalId, idempotent: true, acks: -1 }
  if (a.transactionTimeoutMs !== undefined) pconf.transactionTimeout = a.transactionTimeoutMs
  const producer = kafka.producer({ kafkaJS: pconf })

  const note = (where, e) => {
    const name = errName(e)
    res.countErr(name)
    log(`${where}: ${name} fatal=${e && e.fatal} abortable=${e && e.abortable} retriable=${e && e.retriable}: ${e && e.message}`)
    return name
  }
  const abort = async (i, cause) => {
    for (;;) {
      try {
        await producer.abort()
        res.settle(i, 'aborted')
        return
      } catch (e) {
        const name = note('abort', e)
        if (e && e.fatal) throw new GiveUp(`fatal ${name} in abort after ${cause}`)
        if (!(e && e.retriable)) throw new GiveUp(`abort failed (${name}) after ${cause}`)
        if (res.pastDeadline()) throw new GiveUp('deadline')
        await sleep(100)
      }
    }
  }

  let reason = null
  try {
    await producer.connect() // runs init_transactions for a transactional producer
    for (let i = 0; i < a.transactions; i++) {
      if (res.pastDeadline()) throw new GiveUp('deadline')
      try {
        await producer.transaction()
      } catch (e) {
        throw new GiveUp(`transaction() failed: ${note('transaction()', e)}`)
      }
      const messages = []
      for (let j = 0; j < a.recordsPerTxn; j++) {
        const k = recordKey(a.runId, i, j)
        messages.push({ key: k, value: k })
      }
      try {
        await producer.send({ topic: a.topic, messages })
      } catch (e) {
        const name = note('send', e)
        if (e && e.fatal) throw new GiveUp(`fatal ${name} in send`)
        await abort(i, name) // a failed send in a transaction: abort it
        continue
      }
      if (res.pastDeadline()) throw new GiveUp('deadline')
      res.beginCommit(i)
      for (;;) {
        try {
          await producer.commit()
          res.settle(i, 'committed')
          break
        } catch (e) {
          const name = note('commit', e)
          if (e && e.fatal) throw new GiveUp(`fatal ${name} in commit`)
          if (e && e.abortable) {
            res.committing = null
            await abort(i, name)
            break
          }
          if (!(e && e.retriable)) throw new GiveUp(`commit failed (${name}), neither abortable nor retriable`)
          res.settle(i, 'unknown')
          if (res.pastDeadline()) throw new GiveUp('deadline')
          await sleep(100)
        }
      }
    }
  } catch (e) {
    if (e instanceof GiveUp) reason = e.message
    else reason = `${note('producer', e)}: ${e && e.message}`
  }
  if (reason) log(`giving up: ${reason}`)
  res.emit(reason)
  await res.closeAndExit(() => producer.disconnect(), log)
}

runMain(FAMILY, main)
