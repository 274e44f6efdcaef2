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

const FAMILY = 'confluent-kafka-javascript'

function parseArgs (argv) {
  const spec = {
    '--bootstrap': 'bootstrap', '--topic': 'topic', '--transactional-id': 'transactionalId',
    '--transactions': 'transactions', '--records-per-txn': 'recordsPerTxn', '--run-id': 'runId',
    '--client-id': 'clientId', '--timeout-s': 'timeoutS', '--transaction-timeout-ms': 'transactionTimeoutMs'
  }
  const a = { clientId: `conformance-${FAMILY}`, timeoutS: 120 }
  for (let i = 0; i < argv.length; i++) {
    let flag = argv[i]
    let value
    const eq = flag.indexOf('=')
    if (eq > 0) { value = flag.slice(eq + 1); flag = flag.slice(0, eq) } else { value = argv[++i] }
    if (!(flag in spec) || value === undefined) {
      process.stderr.write(`usage: unknown or incomplete argument ${flag}\n`)
      process.exit(2)
    }
    a[spec[flag]] = value
  }
  for (const k of ['bootstrap', 'topic', 'transactionalId', 'transactions', 'recordsPerTxn', 'runId']) {
    if (a[k] === undefined) { process.stderr.write(`missing argument for ${k}\n`); process.exit(2) }
  }
  a.transactions = parseInt(a.transactions, 10)
  a.recordsPerTxn = parseInt(a.recordsPerTxn, 10)
  a.timeoutS = parseFloat(a.timeoutS)
  if (a.transactionTimeoutMs !== undefined) a.transactionTimeoutMs = parseInt(a.transactionTimeoutMs, 10)
  return a
}

const log = (...parts) => process.stderr.write(`[${FAMILY}] ${parts.join(' ')}\n`)

// librdkafka's error name, as confluent-kafka-python's KafkaError.name() gives it:
// the library's type "ERR__FENCED" -> "_FENCED", "ERR_CONCURRENT_TRANSACTIONS" -> "CONCURRENT_TRANSACTIONS".
function errName (e) {
  if (e && typeof e.type === 'string' && e.type.startsWith('ERR_')) return e.type.slice(4)
  return (e && e.name) || typeof e
}

class GiveUp extends Error {}

async function main () {
  const a = parseArgs(process.argv.slice(2))
  const t0 = process.hrtime.bigint()
  const deadlineMs = Date.now() + a.timeoutS * 1000
  const res = {
    client: FAMILY, version, library: `librdkafka ${ckjs.librdkafkaVersion}`,
    transactions: a.transactions, records_per_txn: a.recordsPerTxn, run_id: a.runId,
    committed: [], aborted: [], unknown: [], errors: {},
    gave_up: false, give_up_reason: null, elapsed_s: 0
  }
  let committing = null
  let printed = false
  const countErr = name => { res.errors[name] = (res.errors[name] || 0) + 1 }
  const settle = (i, outcome) => {
    res.unknown = res.unknown.filter(x => x !== i)
    res[outcome].push(i)
    if (committing === i && outcome !== 'unknown') committing = null
  }
  const emit = reason => {
    if (printed) return
    printed = true
    if (committing !== null && !res.unknown.includes(committing)) res.unknown.push(committing)
    res.unknown.sort((x, y) => x - y)
    if (reason) { res.gave_up = true; res.give_up_reason = reason }
    res.elapsed_s = Number(process.hrtime.bigint() - t0) / 1e9
    process.stdout.write(JSON.stringify(res) + '\n')
  }
  const watchdog = setTimeout(() => {
    log('watchdog: deadline passed inside a blocking call')
    emit('deadline')
    process.exit(0)
  }, Math.max(0, deadlineMs - Date.now()) + 5000)

  const kafka = new Kafka({ kafkaJS: { clientId: a.clientId, brokers: [a.bootstrap], logLevel: logLevel.WARN } })
  const pconf = { transactionalId: a.transactionalId, idempotent: true, acks: -1 }
  if (a.transactionTimeoutMs !== undefined) pconf.transactionTimeout = a.transactionTimeoutMs
  const producer = kafka.producer({ kafkaJS: pconf })

  const pastDeadline = () => Date.now() >= deadlineMs
  const note = (where, e) => {
    const name = errName(e)
    countErr(name)
    log(`${where}: ${name} fatal=${e && e.fatal} abortable=${e && e.abortable} retriable=${e && e.retriable}: ${e && e.message}`)
    return name
  }
  const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
  const abort = async (i, cause) => {
    for (;;) {
      try {
        await producer.abort()
        settle(i, 'aborted')
        return
      } catch (e) {
        const name = note('abort', e)
        if (e && e.fatal) throw new GiveUp(`fatal ${name} in abort after ${cause}`)
        if (!(e && e.retriable)) throw new GiveUp(`abort failed (${name}) after ${cause}`)
        if (pastDeadline()) throw new GiveUp('deadline')
        await sleep(100)
      }
    }
  }

  let reason = null
  try {
    await producer.connect() // runs init_transactions for a transactional producer
    for (let i = 0; i < a.transactions; i++) {
      if (pastDeadline()) throw new GiveUp('deadline')
      try {
        await producer.transaction()
      } catch (e) {
        throw new GiveUp(`transaction() failed: ${note('transaction()', e)}`)
      }
      const messages = []
      for (let j = 0; j < a.recordsPerTxn; j++) {
        const k = `${a.runId}:${i}:${j}`
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
      if (pastDeadline()) throw new GiveUp('deadline')
      committing = i
      for (;;) {
        try {
          await producer.commit()
          settle(i, 'committed')
          break
        } catch (e) {
          const name = note('commit', e)
          if (e && e.fatal) throw new GiveUp(`fatal ${name} in commit`)
          if (e && e.abortable) {
            committing = null
            await abort(i, name)
            break
          }
          if (!(e && e.retriable)) throw new GiveUp(`commit failed (${name}), neither abortable nor retriable`)
          settle(i, 'unknown')
          if (pastDeadline()) throw new GiveUp('deadline')
          await sleep(100)
        }
      }
    }
  } catch (e) {
    if (e instanceof GiveUp) reason = e.message
    else reason = `${note('producer', e)}: ${e && e.message}`
  }
  if (reason) log(`giving up: ${reason}`)
  emit(reason)
  try {
    await Promise.race([producer.disconnect(), sleep(10000)])
  } catch (e) {
    log(`disconnect: ${e && e.message}`)
  }
  clearTimeout(watchdog)
  process.exit(0)
}

main().catch(e => {
  process.stderr.write(`[${FAMILY}] driver crashed: ${e && e.stack}\n`)
  process.exit(3)
})
