// Transactional producer that keeps going through failures and records the outcome of every
// transaction, for kproxy's failure tests. Run (compiled with Args.java, Json.java,
// ClientMetrics.java; see clients.py):
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' TxnOutcomeProducer \
//        --bootstrap 127.0.0.1:9092 --topic orders --transactions 20 --records-per-txn 50
//
// Runs transaction attempts until --transactions of them committed (or --max-attempts /
// --deadline-ms run out), --pause-ms apart. Attempt a writes --records-per-txn records with key
// "<key-prefix><a>-<i>" and value "<key>|<a>|", so a reader can tell every attempt apart.
// Errors are handled as the KafkaProducer javadoc prescribes:
//   * TimeoutException from commitTransaction/abortTransaction/initTransactions: the call is
//     retried (the client keeps the pending result; retrying is the documented way out).
//   * ProducerFencedException, OutOfOrderSequenceException, AuthorizationException,
//     UnsupportedVersionException (fatal): close the producer, make a new one with the same
//     transactional.id; its initTransactions() fences the old one and completes or aborts what
//     it left open.
//   * any other KafkaException (abortable, e.g. a record whose delivery.timeout.ms expired):
//     abortTransaction() and go on with the next attempt.
// The first error of an attempt is printed at once ("error txn <a> <class> at_ms=..."); every
// attempt ends with an outcome, printed as "txn <a> <C|A|U> [error class]" when known:
//   C committed (commitTransaction returned), A aborted (abortTransaction returned, or the
//   producer was replaced before commitTransaction was called), U unknown (the producer had to be
//   replaced after commitTransaction was called: the commit may or may not have happened).
// A read_committed reader must then see every C record exactly once, no A record, and of each U
// attempt either all records once or none.
// The JSON summary (last stdout line) has the counts, "outcomes" (one letter per attempt),
// "attempts" [{n, o, start_ms, end_ms, error, cause (the exception's cause chain)}], error
// classes with counts, restarts, retries.
//
// Options: --bootstrap --topic --transactions --records-per-txn --pause-ms --max-attempts
//          --deadline-ms --transactional-id --key-prefix --delivery-timeout-ms
//          --request-timeout-ms --transaction-timeout-ms --max-block-ms
//          --property key=value (repeatable, any producer config)
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnOutcomeProducer {
    static Properties props;
    static long t0 = System.nanoTime();
    static long deadline;
    static final Map<String, Integer> errors = new TreeMap<>();
    static int restarts, commitRetries, abortRetries, initRetries;

    public static void main(String[] argv) {
        Map<String, List<String>> a = Args.parse(argv);
        String bootstrap = Args.req(a, "bootstrap");
        String topic = Args.req(a, "topic");
        int want = Integer.parseInt(Args.opt(a, "transactions", "20"));
        int perTxn = Integer.parseInt(Args.opt(a, "records-per-txn", "50"));
        long pauseMs = Long.parseLong(Args.opt(a, "pause-ms", "200"));
        int maxAttempts = Integer.parseInt(Args.opt(a, "max-attempts", String.valueOf(want * 3)));
        long deadlineMs = Long.parseLong(Args.opt(a, "deadline-ms", "150000"));
        String txnId = Args.opt(a, "transactional-id", "kproxy-outcome-" + System.nanoTime());
        String keyPrefix = Args.opt(a, "key-prefix", "t");
        deadline = t0 + deadlineMs * 1_000_000L;

        props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, Args.opt(a, "delivery-timeout-ms", "30000"));
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, Args.opt(a, "request-timeout-ms", "10000"));
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Args.opt(a, "transaction-timeout-ms", "60000"));
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Args.opt(a, "max-block-ms", "30000"));
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "kproxy-outcome-producer");
        Args.properties(a, props);

        int committed = 0, aborted = 0, unknown = 0;
        StringBuilder outcomes = new StringBuilder();
        StringBuilder attempts = new StringBuilder("[");
        String fatal = null;
        KafkaProducer<String, String> producer = null;
        try {
            producer = newProducer();
            for (int n = 1; committed < want && n <= maxAttempts && System.nanoTime() < deadline; n++) {
                long start = ms();
                String[] err = new String[1], cause = new String[1];
                char o;
                boolean commitCalled = false;
                try {
                    producer.beginTransaction();
                    List<Future<RecordMetadata>> sent = new ArrayList<>(perTxn);
                    for (int i = 0; i < perTxn; i++) {
                        String key = keyPrefix + n + "-" + i;
                        sent.add(producer.send(new ProducerRecord<>(topic, key, key + "|" + n + "|")));
                    }
                    producer.flush();
                    for (Future<RecordMetadata> f : sent) f.get();
                    commitCalled = true;
                    retryOnTimeout(producer::commitTransaction, "commit");
                    o = 'C';
                } catch (Exception e) {
                    Throwable c = unwrap(e);
                    err[0] = note(c);
                    cause[0] = chain(c);
                    System.out.println("error txn " + n + " " + err[0] + " at_ms=" + ms() + " commit_called=" + commitCalled
                                       + " chain=" + cause[0]);
                    System.out.flush();
                    o = 'A';
                    boolean replace = isFatal(c);
                    if (!replace) {
                        try {
                            retryOnTimeout(producer::abortTransaction, "abort");
                        } catch (Exception e2) {
                            note(unwrap(e2));
                            replace = true;
                        }
                    }
                    if (replace) {
                        if (commitCalled) o = 'U';
                        producer.close(Duration.ZERO);
                        producer = null;
                        restarts++;
                        producer = newProducer();
                    }
                }
                if (o == 'C') committed++; else if (o == 'A') aborted++; else unknown++;
                outcomes.append(o);
                if (n > 1) attempts.append(',');
                attempts.append("{\"n\":").append(n).append(",\"o\":\"").append(o).append('"')
                        .append(",\"start_ms\":").append(start).append(",\"end_ms\":").append(ms())
                        .append(",\"error\":").append(err[0] == null ? "null" : Json.q(err[0]))
                        .append(",\"cause\":").append(cause[0] == null ? "null" : Json.q(cause[0])).append('}');
                System.out.println("txn " + n + " " + o + (err[0] == null ? "" : " " + err[0]));
                System.out.flush();
                if (pauseMs > 0) Thread.sleep(pauseMs);
            }
        } catch (Exception e) {
            fatal = e.getClass().getName() + ": " + e.getMessage();
        } finally {
            if (producer != null) producer.close(Duration.ofSeconds(5));
        }
        attempts.append(']');
        boolean ok = fatal == null && committed == want;

        StringBuilder js = new StringBuilder("{");
        js.append("\"ok\":").append(ok);
        js.append(",\"topic\":").append(Json.q(topic));
        js.append(",\"transactional_id\":").append(Json.q(txnId));
        js.append(",\"key_prefix\":").append(Json.q(keyPrefix));
        js.append(",\"records_per_txn\":").append(perTxn);
        js.append(",\"committed\":").append(committed);
        js.append(",\"aborted\":").append(aborted);
        js.append(",\"unknown\":").append(unknown);
        js.append(",\"outcomes\":").append(Json.q(outcomes.toString()));
        js.append(",\"producer_restarts\":").append(restarts);
        js.append(",\"commit_retries\":").append(commitRetries);
        js.append(",\"abort_retries\":").append(abortRetries);
        js.append(",\"init_retries\":").append(initRetries);
        js.append(",\"errors\":").append(Json.countMap(errors));
        js.append(",\"attempts\":").append(attempts);
        js.append(",\"elapsed_ms\":").append(ms());
        js.append(",\"error\":").append(fatal == null ? "null" : Json.q(fatal));
        js.append("}");
        System.out.println(js);
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }

    static long ms() { return (System.nanoTime() - t0) / 1_000_000L; }

    static KafkaProducer<String, String> newProducer() {
        KafkaProducer<String, String> p = new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
        retryOnTimeout(p::initTransactions, "init");
        return p;
    }

    interface Call { void run(); }

    /** Runs `call`, again after each TimeoutException, until it returns or the deadline passes. */
    static void retryOnTimeout(Call call, String what) {
        while (true) {
            try {
                call.run();
                return;
            } catch (TimeoutException e) {
                note(e);
                if (System.nanoTime() >= deadline) throw e;
                switch (what) {
                    case "commit": commitRetries++; break;
                    case "abort": abortRetries++; break;
                    default: initRetries++;
                }
                System.out.println("retry " + what + " after " + e.getClass().getName());
                System.out.flush();
            }
        }
    }

    /** The KafkaProducer javadoc's fatal set: only a new producer instance can go on. */
    static boolean isFatal(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof ProducerFencedException || c instanceof OutOfOrderSequenceException
                    || c instanceof AuthorizationException || c instanceof UnsupportedVersionException) return true;
        }
        return false;
    }

    static Throwable unwrap(Throwable e) {
        return (e instanceof ExecutionException && e.getCause() != null) ? e.getCause() : e;
    }

    /** "Class: message <- Class: message ..." over the cause chain (for the log lines). */
    static String chain(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (b.length() > 0) b.append(" <- ");
            b.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
            if (c.getCause() == c) break;
        }
        return b.toString();
    }

    static String note(Throwable e) {
        String name = e.getClass().getName();
        synchronized (errors) { errors.merge(name, 1, Integer::sum); }
        return name;
    }
}
