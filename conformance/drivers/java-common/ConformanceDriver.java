// Conformance driver for the Java client (kafka-clients), issue #31. One source, compiled once per
// client version (java-4.4: kafka-clients 4.4.0; java-3.x: the newest 3.x, see ../java-3.x/pom.xml).
// It uses only API present in both; version-specific handling goes by class names at run time.
//
//   run --bootstrap HOST:PORT --topic T --transactional-id ID --transactions N --records-per-txn M
//       --run-id RUNID [--client-id CID] [--timeout-s 120] [--transaction-timeout-ms MS]
//       [--property k=v]... [--fence-before-commit K] [--break duplicate|drop|dirty]
//       [--mode produce|ctp --input-topic IN --group G]
//
// produce mode: for i in 0..N-1: beginTransaction, send M records key = value = "RUNID:i:j",
// commitTransaction. Error handling as the KafkaProducer javadoc prescribes (README.md here).
// The last stdout line is the account JSON of the driver contract (conformance/verifier/README.md).
//
// Test-only options (never used by the conformance runner):
//   --fence-before-commit K  after sending transaction K's records, a second producer with the same
//                            transactional.id calls initTransactions (fencing this one) before K commits
//   --break duplicate        after the run, one more committed transaction re-sends txn 0's records
//   --break drop             transaction N/2 is aborted but reported as committed
//   --break dirty            transaction N/2 is committed but reported as aborted
//   --break split            transaction N/2's records go out in two committed transactions (first
//                            half, then second half, all to partition 0), reported as one committed
//   --break no-progress      every transaction is sent and then aborted (reported aborted)
//   --break retry-duplicate  transaction N/2 sends its record 0 a second time before its commit
//   --break offsets          (--mode ctp) commits each input's offset, not offset + 1
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnknownServerException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ConformanceDriver {
    // --- options
    static final Map<String, List<String>> opts = new HashMap<>();
    static String family, bootstrap, topic, txnId, runId, clientId, breakMode, mode;
    static volatile String accountRunId;   // the account's run_id: runId, or in ctp mode runId + ":" + the input's run id
    static int nTxns, perTxn, fenceAt = -1, abortEvery = 0, firstIndex = 0;
    static double timeoutS;
    static final long t0 = System.nanoTime();

    // --- the account; every change happens under LOCK so the deadline watchdog sees a consistent state
    static final Object LOCK = new Object();
    static final List<Integer> committed = new ArrayList<>(), aborted = new ArrayList<>(), unknown = new ArrayList<>();
    static final Map<String, Integer> errors = new TreeMap<>();
    static boolean finished;
    static int current = -1;            // transaction in progress, -1 none
    static boolean commitCalled;        // commitTransaction (or sendOffsets+commit) was called for `current`

    static class Fatal extends RuntimeException {
        private static final long serialVersionUID = 1L;
        Fatal(String reason) { super(reason); }
    }

    public static void main(String[] argv) throws Exception {
        parse(argv);
        family = System.getProperty("conformance.family", "java");
        bootstrap = req("bootstrap");
        topic = req("topic");
        txnId = req("transactional-id");
        nTxns = Integer.parseInt(req("transactions"));
        perTxn = Integer.parseInt(req("records-per-txn"));
        runId = req("run-id");
        accountRunId = runId;
        clientId = opt("client-id", "conformance-" + family);
        timeoutS = Double.parseDouble(opt("timeout-s", "120"));
        breakMode = opt("break", null);
        mode = opt("mode", "produce");
        fenceAt = Integer.parseInt(opt("fence-before-commit", "-1"));
        // The runner's input fills (conformance/runner/cell.py fill_input): --abort-every K writes
        // transactions i with i % K == K - 1 to the log and aborts them (K = 1: all of them);
        // --first-index F keys transaction i as RUNID:(F + i):j, so a fill can go on where an
        // earlier one stopped.
        abortEvery = Integer.parseInt(opt("abort-every", "0"));
        firstIndex = Integer.parseInt(opt("first-index", "0"));
        if (breakMode != null && !List.of("duplicate", "drop", "dirty", "split", "no-progress", "retry-duplicate", "offsets",
                                          "read-uncommitted").contains(breakMode))
            throw new IllegalArgumentException("--break must be duplicate, drop, dirty, split, no-progress, retry-duplicate, offsets "
                                               + "or read-uncommitted");

        Thread watchdog = new Thread(() -> {
            long until = t0 + (long) (timeoutS * 1e9);
            for (long left; (left = until - System.nanoTime()) > 0; ) {
                try { Thread.sleep(Math.max(1, left / 1_000_000)); } catch (InterruptedException e) { return; }
            }
            synchronized (LOCK) {
                if (finished) return;
                settleCurrent();
                finish(true, "deadline");
            }
            Runtime.getRuntime().halt(0);
        }, "deadline");
        watchdog.setDaemon(true);
        watchdog.start();

        String reason = null;
        try {
            if (mode.equals("ctp")) runCtp();
            else if (mode.equals("produce")) runProduce();
            else throw new IllegalArgumentException("--mode must be produce or ctp");
        } catch (Fatal f) {
            reason = f.getMessage();
        }
        synchronized (LOCK) {
            while (finished) LOCK.wait();   // the watchdog printed the account and halts the JVM
            settleCurrent();
            finish(reason != null, reason);
        }
        System.exit(0);
    }

    // ------------------------------------------------------------------ produce mode
    static void runProduce() {
        KafkaProducer<String, String> producer = newProducer();
        try {
            initTransactions(producer);
            for (int i = 0; i < nTxns; i++) {
                boolean sendIt = true, reportSwap = false;
                if (breakMode != null && i == nTxns / 2) {
                    if (breakMode.equals("drop")) sendIt = false;     // aborted, reported committed
                    if (breakMode.equals("dirty")) reportSwap = true; // committed, reported aborted
                }
                boolean abortIt = abortEvery > 0 && i % abortEvery == abortEvery - 1;
                String outcome = "split".equals(breakMode) && i == nTxns / 2 ? splitTransaction(producer, i)
                                 : oneTransaction(producer, i, firstIndex + i, sendIt, abortIt || "no-progress".equals(breakMode));
                if (outcome.equals("fatal-closed")) return; // unreachable: Fatal is thrown
                if (!sendIt && outcome.equals("aborted")) outcome = "committed";
                if (reportSwap && outcome.equals("committed")) outcome = "aborted";
                record(i, outcome);
            }
            if ("duplicate".equals(breakMode)) {
                // One more transaction re-sending transaction 0's records; it is not in the account.
                String outcome = oneTransaction(producer, -1, 0, true, false);
                synchronized (LOCK) { current = -1; }
                System.err.println("[driver] duplicate of txn 0 re-sent: " + outcome);
            }
        } finally {
            boolean done;
            synchronized (LOCK) { done = finished; }
            if (!done) producer.close(Duration.ofSeconds(5));
        }
    }

    /** Runs transaction `index` (its records are "RUNID:keyIndex:j"); returns "committed",
     *  "aborted" or "unknown" (the last only with a retried commit that never succeeded, which ends
     *  at the deadline). With send == false, sends nothing and aborts (break drop); with
     *  abortAfterWrite, flushes the records (so they are in the log and the abort is a real EndTxn)
     *  and aborts (--abort-every, break no-progress). Throws Fatal after closing the producer when
     *  the javadoc says the producer cannot go on. */
    static String oneTransaction(KafkaProducer<String, String> producer, int index, int keyIndex, boolean send,
                                 boolean abortAfterWrite) {
        synchronized (LOCK) { current = index; commitCalled = false; }
        try {
            producer.beginTransaction();
            for (int j = 0; j < perTxn; j++) {
                String key = runId + ":" + keyIndex + ":" + j;
                if (send) producer.send(new ProducerRecord<>(topic, key, key), ConformanceDriver::delivered);
            }
            if ("retry-duplicate".equals(breakMode) && index == nTxns / 2) {
                // An application-level "retry" of record 0 inside the same transaction.
                String key = runId + ":" + keyIndex + ":0";
                producer.send(new ProducerRecord<>(topic, key, key), ConformanceDriver::delivered);
            }
            if (abortAfterWrite) producer.flush();
            if (!send || abortAfterWrite) {
                abortWithRetry(producer);
                return "aborted";
            }
            if (fenceAt >= 0 && index == fenceAt) fence();
            markCommitCalled();
            commitWithRetry(producer);
            return "committed";
        } catch (Fatal f) {
            throw f;
        } catch (KafkaException e) {
            return abortOrGiveUp(producer, e);
        } catch (RuntimeException e) {
            note(e);
            producer.close(Duration.ZERO);
            throw new Fatal("unexpected: " + name(e));
        }
    }

    /** --break split: transaction `index`'s records in two committed transactions, the first half
     *  and then the second, all to partition 0 (so one partition holds both commits); the caller
     *  reports it as one committed transaction. */
    static String splitTransaction(KafkaProducer<String, String> producer, int index) {
        synchronized (LOCK) { current = index; commitCalled = false; }
        try {
            for (int half = 0; half < 2; half++) {
                producer.beginTransaction();
                for (int j = half == 0 ? 0 : perTxn / 2; j < (half == 0 ? perTxn / 2 : perTxn); j++) {
                    String key = runId + ":" + index + ":" + j;
                    producer.send(new ProducerRecord<>(topic, 0, key, key), ConformanceDriver::delivered);
                }
                if (half == 1) markCommitCalled();
                commitWithRetry(producer);
            }
            System.err.println("[driver] transaction " + index + " split over two commits");
            return "committed";
        } catch (Fatal f) {
            throw f;
        } catch (KafkaException e) {
            return abortOrGiveUp(producer, e);
        }
    }

    static void markCommitCalled() {
        synchronized (LOCK) {
            while (finished) {
                try { LOCK.wait(); } catch (InterruptedException ie) { Thread.currentThread().interrupt(); }
            }
            commitCalled = true;
        }
    }

    /** commitTransaction(); a TimeoutException leaves the outcome unknown, and the javadoc allows
     *  calling commitTransaction() again: done until it returns, fails otherwise, or the deadline. */
    static void commitWithRetry(KafkaProducer<String, String> producer) {
        while (true) {
            try {
                producer.commitTransaction();
                return;
            } catch (TimeoutException e) {
                note(e);
            }
        }
    }

    /** A transaction failed with `e`: a fatal error closes the producer and ends the run (Fatal);
     *  any other is abortable: abortTransaction(), and the caller goes on with the next
     *  transaction. Returns the transaction's outcome, "aborted". */
    static String abortOrGiveUp(KafkaProducer<String, String> producer, KafkaException e) {
        note(e);
        if (isFatal(e)) {
            producer.close(Duration.ZERO);
            throw new Fatal("fatal: " + name(e));
        }
        abortWithRetry(producer);
        return "aborted";
    }

    static void abortWithRetry(KafkaProducer<String, String> producer) {
        while (true) {
            try {
                producer.abortTransaction();
                return;
            } catch (TimeoutException e) {
                note(e);
            } catch (RuntimeException e) {
                note(e);
                producer.close(Duration.ZERO);
                throw new Fatal((isFatal(e) ? "fatal: " : "abort failed: ") + name(e));
            }
        }
    }

    static void initTransactions(KafkaProducer<String, String> producer) {
        while (true) {
            try {
                producer.initTransactions();
                return;
            } catch (TimeoutException e) {
                note(e);   // the javadoc: initTransactions() may be called again after a timeout
            } catch (RuntimeException e) {
                note(e);
                producer.close(Duration.ZERO);
                throw new Fatal((isFatal(e) ? "fatal: " : "init failed: ") + name(e));
            }
        }
    }

    /** A second producer with the same transactional.id: its initTransactions() bumps the epoch,
     *  aborts our open transaction, and fences us (test option --fence-before-commit). */
    static void fence() {
        Properties p = producerProps();
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId + "-fencer");
        try (KafkaProducer<String, String> other = new KafkaProducer<>(p)) {
            other.initTransactions();
        }
        System.err.println("[driver] fenced by a second producer before committing txn " + fenceAt);
    }

    // ------------------------------------------------------------------ consume-transform-produce mode
    /** Reads --input-topic read_committed in group --group; each transaction takes what one poll
     *  returns (at most M records), writes for each one output record with key (and value)
     *  "RUNID:<input key>" to --topic, sendOffsetsToTransaction, commitTransaction; an aborted
     *  transaction rewinds the consumer to the group's committed offsets. Stops when N*M input
     *  records went out in committed transactions. The input is expected to hold N*M records with
     *  keys "[PREFIX:]i:j" (i < N, j < M: what a produce-mode run with run id PREFIX writes); the
     *  account's run_id is then "RUNID:PREFIX" and it lists input transaction i as committed once
     *  all M of its records went out in committed transactions, so the verifier checks that every
     *  input record appears exactly once in the output. */
    static void runCtp() {
        String in = req("input-topic"), group = req("group");
        long want = (long) nTxns * perTxn;
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId + "-consumer");
        // --break read-uncommitted: a known-bad consumer that also returns aborted records (the
        // verifier must call its outputs of aborted inputs a dirty read).
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read-uncommitted".equals(breakMode) ? "read_uncommitted" : "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(Math.max(1, perTxn)));
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        KafkaProducer<String, String> producer = newProducer();
        Map<Integer, Integer> doneByInput = new TreeMap<>();   // input txn -> its records out in committed txns
        long consumedCommitted = 0;
        int txn = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(Collections.singletonList(in));
            initTransactions(producer);
            // Each output record goes to its input record's partition number when the output topic
            // has that many partitions: a transaction's records then keep their input order per
            // partition (the verifier checks it); otherwise the default partitioner.
            int outPartitions = producer.partitionsFor(topic).size();
            while (consumedCommitted < want) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(500));
                if (recs.isEmpty()) continue;
                int index = txn++;
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                Map<Integer, Integer> inThis = new HashMap<>();
                String outcome;
                try {
                    producer.beginTransaction();
                    for (ConsumerRecord<String, String> r : recs) {
                        String key = runId + ":" + r.key();
                        Integer partition = r.partition() < outPartitions ? r.partition() : null;
                        producer.send(new ProducerRecord<>(topic, partition, key, key), ConformanceDriver::delivered);
                        // The next offset to read; --break offsets commits the record's own (off by one).
                        long next = "offsets".equals(breakMode) ? r.offset() : r.offset() + 1;
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(next));
                        inThis.merge(inputTxn(r.key()), 1, Integer::sum);
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    markCommitCalled();
                    commitWithRetry(producer);
                    outcome = "committed";
                } catch (Fatal f) {
                    throw f;
                } catch (KafkaException e) {
                    outcome = abortOrGiveUp(producer, e);
                }
                if (outcome.equals("committed")) {
                    consumedCommitted += recs.count();
                    synchronized (LOCK) {
                        for (Map.Entry<Integer, Integer> e : inThis.entrySet()) {
                            int done = doneByInput.merge(e.getKey(), e.getValue(), Integer::sum);
                            if (e.getKey() >= 0 && done >= perTxn && !committed.contains(e.getKey())) committed.add(e.getKey());
                        }
                    }
                } else {
                    rewind(consumer);
                }
                System.err.println("[driver] ctp txn " + index + " " + outcome + " (" + recs.count() + " records, "
                                   + consumedCommitted + "/" + want + ")");
            }
        } finally {
            boolean done;
            synchronized (LOCK) { done = finished; }
            if (!done) producer.close(Duration.ofSeconds(5));
        }
    }

    /** Input transaction index i of an input key "[PREFIX:]i:j" (-1 if it is not of that form);
     *  the first key seen sets the account's run_id to "RUNID:PREFIX". */
    static int inputTxn(String key) {
        String[] parts = key.split(":", -1);
        if (parts.length < 2) return -1;
        try {
            int i = Integer.parseInt(parts[parts.length - 2]);
            Integer.parseInt(parts[parts.length - 1]);
            if (accountRunId.equals(runId) && parts.length > 2)
                accountRunId = runId + ":" + key.substring(0, key.length() - parts[parts.length - 2].length() - parts[parts.length - 1].length() - 2);
            return i;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    static void rewind(KafkaConsumer<String, String> consumer) {
        Map<TopicPartition, OffsetAndMetadata> c = consumer.committed(consumer.assignment());
        for (TopicPartition tp : consumer.assignment()) {
            OffsetAndMetadata o = c.get(tp);
            if (o != null) consumer.seek(tp, o.offset());
            else consumer.seekToBeginning(Collections.singleton(tp));
        }
    }

    // ------------------------------------------------------------------ errors
    /** The javadoc's fatal exceptions: the producer must be closed. Anywhere in the cause chain
     *  (the client wraps the error that put it into the fatal state). Kafka 4.x also groups the
     *  errors that need a new producer under ApplicationRecoverableException (KIP-1050; fenced,
     *  invalid producer epoch, invalid pid mapping), checked by name so 3.x compiles the same source. */
    static boolean isFatal(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof OutOfOrderSequenceException
                || t instanceof AuthorizationException || t instanceof UnsupportedVersionException)
                return true;
            for (Class<?> c = t.getClass(); c != null; c = c.getSuperclass())
                if (c.getName().equals("org.apache.kafka.common.errors.ApplicationRecoverableException")) return true;
            if (t.getCause() == t) break;
        }
        return false;
    }

    /** Kafka's error name for the most specific exception of the chain, else its class name. */
    static String name(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null && t.getCause() != t
               && (t.getClass() == KafkaException.class || t instanceof java.util.concurrent.ExecutionException))
            t = t.getCause();
        Errors err = Errors.forException(t);
        if (err == Errors.UNKNOWN_SERVER_ERROR && !(t instanceof UnknownServerException)) return t.getClass().getSimpleName();
        return err.name();
    }

    /** Send callback (the producer's I/O thread): a record's delivery error counts too. */
    static void delivered(org.apache.kafka.clients.producer.RecordMetadata md, Exception e) {
        if (e == null) return;
        synchronized (errors) { errors.merge(name(e), 1, Integer::sum); }
    }

    static void note(Throwable e) {
        String n = name(e);
        synchronized (errors) { errors.merge(n, 1, Integer::sum); }
        System.err.println("[driver] txn " + current + ": " + n + " (" + e + ")");
    }

    // ------------------------------------------------------------------ account
    static void record(int i, String outcome) {
        synchronized (LOCK) {
            if (finished) return;
            (outcome.equals("committed") ? committed : outcome.equals("aborted") ? aborted : unknown).add(i);
            current = -1;
        }
    }

    /** The transaction in progress when the run ends (fatal error or deadline): unknown if
     *  commitTransaction was called for it (it may have committed); in no list otherwise
     *  (abandoned before its commit was requested: it can never commit, none of it may be
     *  visible; CONTRACT.md). Caller holds LOCK. */
    static void settleCurrent() {
        if (current < 0) return;
        if (commitCalled && !committed.contains(current) && !aborted.contains(current) && !unknown.contains(current))
            unknown.add(current);
        current = -1;
    }

    static void finish(boolean gaveUp, String reason) {
        finished = true;
        double elapsed = (System.nanoTime() - t0) / 1e9;
        StringBuilder s = new StringBuilder("{");
        s.append("\"client\":").append(q(family));
        s.append(",\"version\":").append(q(clientVersion()));
        s.append(",\"library\":").append(q(clientVersion()));
        s.append(",\"transactions\":").append(nTxns);
        s.append(",\"records_per_txn\":").append(perTxn);
        s.append(",\"run_id\":").append(q(accountRunId));
        s.append(",\"committed\":").append(list(committed));
        s.append(",\"aborted\":").append(list(aborted));
        s.append(",\"unknown\":").append(list(unknown));
        s.append(",\"errors\":{");
        boolean first = true;
        Map<String, Integer> errs;
        synchronized (errors) { errs = new TreeMap<>(errors); }
        for (Map.Entry<String, Integer> e : errs.entrySet()) {
            if (!first) s.append(',');
            first = false;
            s.append(q(e.getKey())).append(':').append(e.getValue());
        }
        s.append("},\"gave_up\":").append(gaveUp);
        s.append(",\"give_up_reason\":").append(reason == null ? "null" : q(reason));
        s.append(",\"elapsed_s\":").append(String.format(java.util.Locale.ROOT, "%.3f", elapsed));
        s.append('}');
        System.out.println();
        System.out.println(s);
        System.out.flush();
    }

    /** The kafka-clients version on the classpath (its kafka/kafka-version.properties; the class
     *  that reads it moved between 3.x and 4.x). */
    static String clientVersion() {
        try (java.io.InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties p = new Properties();
            if (in != null) p.load(in);
            return p.getProperty("version", "unknown");
        } catch (java.io.IOException e) {
            return "unknown";
        }
    }

    static String list(List<Integer> l) {
        List<Integer> c = new ArrayList<>(l);
        Collections.sort(c);
        StringBuilder s = new StringBuilder("[");
        for (int k = 0; k < c.size(); k++) s.append(k == 0 ? "" : ",").append(c.get(k));
        return s.append(']').toString();
    }

    static String q(String v) {
        StringBuilder s = new StringBuilder("\"");
        for (char c : v.toCharArray()) {
            if (c == '"' || c == '\\') s.append('\\').append(c);
            else if (c < 0x20) s.append(String.format("\\u%04x", (int) c));
            else s.append(c);
        }
        return s.append('"').toString();
    }

    // ------------------------------------------------------------------ config and options
    static Properties producerProps() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        String tt = opt("transaction-timeout-ms", null);
        if (tt != null) p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, tt);
        for (String kv : opts.getOrDefault("property", List.of())) {
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("--property wants key=value: " + kv);
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return p;
    }

    static KafkaProducer<String, String> newProducer() {
        return new KafkaProducer<>(producerProps());
    }

    static void parse(String[] argv) {
        for (int k = 0; k < argv.length; k++) {
            if (!argv[k].startsWith("--") || k + 1 >= argv.length)
                throw new IllegalArgumentException("expected --name value, got " + argv[k]);
            opts.computeIfAbsent(argv[k].substring(2), x -> new ArrayList<>()).add(argv[++k]);
        }
    }

    static String opt(String name, String dflt) {
        List<String> v = opts.get(name);
        return v == null ? dflt : v.get(v.size() - 1);
    }

    static String req(String name) {
        String v = opt(name, null);
        if (v == null) throw new IllegalArgumentException("--" + name + " is required");
        return v;
    }
}
