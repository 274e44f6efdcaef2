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

const FAMILY = 'kafkajs'
const FATAL = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH'])

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
  const a = parseArgs(process.argv.slice(2))
  const t0 = process.hrtime.bigint()
  const deadlineMs = Date.now() + a.timeoutS * 1000
  const res = {
    client: FAMILY, version: kafkajsVersion, library: kafkajsVersion,
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
    countErr(name)
    log(`${where}: ${name}: ${e && e.message}`)
    return name
  }
  const pastDeadline = () => Date.now() >= deadlineMs

  let reason = null
  try {
    await producer.connect()
    for (let i = 0; i < a.transactions; i++) {
      if (pastDeadline()) { reason = 'deadline'; break }
      let txn
      try {
        txn = await producer.transaction()
      } catch (e) {
        reason = `transaction() failed: ${note('transaction()', e)}`
        break
      }
      const messages = []
      for (let j = 0; j < a.recordsPerTxn; j++) {
        const k = `${a.runId}:${i}:${j}`
        messages.push({ key: k, value: k })
      }
      let stage = 'send'
      try {
        await txn.send({ topic: a.topic, acks: -1, messages })
        if (pastDeadline()) { reason = 'deadline'; break }
        stage = 'commit'
        committing = i
        await txn.commit()
        settle(i, 'committed')
      } catch (e) {
        const name = note(stage, e)
        if (stage === 'commit') settle(i, 'unknown')
        if (FATAL.has(name)) {
          reason = `fatal ${name} in ${stage}`
          break
        }
        try {
          await txn.abort()
          settle(i, 'aborted')
        } catch (e2) {
          reason = `abort failed (${note('abort', e2)}) after ${stage} error ${name}`
          break
        }
      }
    }
  } catch (e) {
    reason = `${note('producer', e)}: ${e && e.message}`
  }
  emit(reason)
  try {
    await Promise.race([producer.disconnect(), new Promise(resolve => setTimeout(resolve, 10000))])
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
