'use strict'
// What the JavaScript workload drivers (kafkajs, confluent-kafka-javascript) share: the
// contract's command line, the deadline watchdog, the account of indexes and errors, and the
// final JSON line. See ../CONTRACT.md. Each driver keeps its client's own transaction logic and
// requires this file by its path (it needs no package).

const OUTCOMES = ['committed', 'aborted', 'unknown']

// The contract's options: { bootstrap, topic, transactionalId, transactions, recordsPerTxn,
// runId, clientId, timeoutS, transactionTimeoutMs (undefined when absent) }. `--flag value` or
// `--flag=value`; an unknown, incomplete or missing argument exits with status 2.
function parseArgs (family, argv) {
  const spec = {
    '--bootstrap': 'bootstrap', '--topic': 'topic', '--transactional-id': 'transactionalId',
    '--transactions': 'transactions', '--records-per-txn': 'recordsPerTxn', '--run-id': 'runId',
    '--client-id': 'clientId', '--timeout-s': 'timeoutS', '--transaction-timeout-ms': 'transactionTimeoutMs',
    '--mode': 'mode', '--input-topic': 'inputTopic', '--group': 'group'
  }
  const a = { clientId: `conformance-${family}`, timeoutS: 120, mode: 'produce' }
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

// A log function writing `[family] ...` lines to stderr.
const logger = family => (...parts) => process.stderr.write(`[${family}] ${parts.join(' ')}\n`)

// Key and value of record j of transaction i: RUNID:i:j.
const recordKey = (runId, i, j) => `${runId}:${i}:${j}`

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// The run's outcome and its one JSON line (printed once, by the driver or the watchdog).
class Account {
  constructor (family, version, library, a) {
    this.t0 = process.hrtime.bigint()
    this.deadlineMs = Date.now() + a.timeoutS * 1000
    this.committing = null // index whose commit was requested and not yet settled
    this.printed = false
    this.d = {
      client: family, version, library,
      transactions: a.transactions, records_per_txn: a.recordsPerTxn, run_id: a.runId,
      committed: [], aborted: [], unknown: [], errors: {},
      gave_up: false, give_up_reason: null, elapsed_s: 0
    }
  }

  pastDeadline () { return Date.now() >= this.deadlineMs }

  countErr (name) { this.d.errors[name] = (this.d.errors[name] || 0) + 1 }

  // The commit of index i is about to be requested: until settled, it is unknown.
  beginCommit (i) { this.committing = i }

  // Records index i as committed, aborted or unknown (moving it out of unknown); a commit settled
  // as committed or aborted is no longer pending.
  settle (i, outcome) {
    if (!OUTCOMES.includes(outcome)) throw new Error(`unknown outcome ${outcome}`)
    this.d.unknown = this.d.unknown.filter(x => x !== i)
    this.d[outcome].push(i)
    if (this.committing === i && outcome !== 'unknown') this.committing = null
  }

  // Prints the JSON line (once); a pending commit counts as unknown.
  emit (reason) {
    if (this.printed) return
    this.printed = true
    const d = this.d
    if (this.committing !== null && !d.unknown.includes(this.committing)) d.unknown.push(this.committing)
    d.unknown.sort((x, y) => x - y)
    if (reason) { d.gave_up = true; d.give_up_reason = reason }
    d.elapsed_s = Number(process.hrtime.bigint() - this.t0) / 1e9
    process.stdout.write(JSON.stringify(d) + '\n')
  }

  // 5 s past the deadline (a call that hangs), print the JSON as it stands and exit 0.
  startWatchdog (log) {
    this.watchdog = setTimeout(() => {
      log('watchdog: deadline passed inside a blocking call')
      this.emit('deadline')
      process.exit(0)
    }, Math.max(0, this.deadlineMs - Date.now()) + 5000)
  }

  // After emit: disconnect (bounded to 10 s, errors logged) and exit 0.
  async closeAndExit (disconnect, log) {
    try {
      await Promise.race([disconnect(), sleep(10000)])
    } catch (e) {
      log(`disconnect: ${e && e.message}`)
    }
    clearTimeout(this.watchdog)
    process.exit(0)
  }
}

// Consume-transform-produce (CONTRACT.md): output key = RUNID:<input key>; the input keys are
// PREFIX:i:j, the account's run_id becomes RUNID:PREFIX, and input transaction i is committed once
// all M of its records went out in committed transactions.
class CtpProgress {
  constructor (account, runId, m) { this.account = account; this.runId = runId; this.m = m; this.done = {}; this.records = 0 }
  outputKey (inputKey) { return `${this.runId}:${inputKey}` }
  committed (inputKeys) {
    for (const k of inputKeys) {
      this.records++
      const parts = k.split(':')
      const i = parseInt(parts[parts.length - 2], 10)
      if (parts.length < 2 || Number.isNaN(i)) continue
      const prefix = parts.slice(0, -2).join(':')
      if (prefix && this.account.d.run_id === this.runId) this.account.d.run_id = `${this.runId}:${prefix}`
      this.done[i] = (this.done[i] || 0) + 1
      if (this.done[i] === this.m) this.account.settle(i, 'committed')
    }
  }
}

// Runs the driver's main; a crash (not a client error) exits with status 3.
function runMain (family, main) {
  main().catch(e => {
    process.stderr.write(`[${family}] driver crashed: ${e && e.stack}\n`)
    process.exit(3)
  })
}

module.exports = { parseArgs, logger, recordKey, sleep, Account, CtpProgress, runMain }
