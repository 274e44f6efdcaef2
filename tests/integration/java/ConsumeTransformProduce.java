// Exactly-once consume-transform-produce job for kproxy's chaos tests. Run (compiled with Args.java, Json.java,
// ClientMetrics.java; see clients.py):
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' ConsumeTransformProduce \
//        --bootstrap 127.0.0.1:9092 --input in --output out --group g --stop-file /tmp/stop
//
// A read_committed consumer (group member, no auto commit) reads --input; for each polled batch a
// transactional producer writes one output record per input record to --output and commits the
// consumer's next offsets in the same transaction (sendOffsetsToTransaction with the consumer's
// group metadata, KIP-447). The shape and the error handling follow Kafka's own example
// (examples/src/main/java/kafka/examples/ExactlyOnceMessageProcessor.java in apache/kafka) and
// the KafkaProducer javadoc:
//   * TimeoutException from commitTransaction / abortTransaction / initTransactions: the same
//     call again (the client keeps the pending result; that is the documented way out);
//   * fatal errors (ProducerFencedException, OutOfOrderSequenceException, AuthorizationException,
//     UnsupportedVersionException, FencedInstanceIdException): the example shuts down; this job
//     closes the producer and starts a new one with the same transactional.id (its
//     initTransactions fences the old epoch and completes or aborts what was left open), so the
//     run goes on;
//   * any other KafkaException (abortable): abortTransaction;
// and after an abort or a restart the consumer is rewound to the group's committed offsets, which
// moved only with committed output, so nothing is lost or written twice.
// Output record: same key, value "<key>|T|<INPUT VALUE UPPER-CASED>|src=<partition>@<offset>".
//
// The job runs until --stop-file exists and it has caught up (position = end offset of every
// input partition, all partitions assigned), or until --max-runtime-ms (then it fails). Prints
// "started: ..." once its producer is initialised, "progress ..." every 5 s, "error ..." for each
// error it handles, and one JSON summary line: ok, records (input records whose output
// committed), transactions_committed, transactions_aborted, producer_restarts, commit_retries,
// abort_retries, rebalances, errors {class: count}, causes (first distinct cause chains),
// connection counters of both clients, elapsed_ms, error.
//
// Options: --bootstrap --input --output --group --transactional-id --stop-file --max-runtime-ms
//          --max-poll-records --request-timeout-ms --delivery-timeout-ms --transaction-timeout-ms
//          --max-block-ms --producer-property k=v --consumer-property k=v (repeatable)
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Supplier;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ConsumeTransformProduce {
    static Properties producerProps;
    static final long T0 = System.nanoTime();
    static long deadline;
    static final Map<String, Integer> errors = new TreeMap<>();
    static final Set<String> causes = new LinkedHashSet<>();
    static int restarts, commitRetries, abortRetries, initRetries, rebalances;

    public static void main(String[] argv) {
        Map<String, List<String>> a = Args.parse(argv);
        String bootstrap = Args.req(a, "bootstrap");
        String input = Args.req(a, "input");
        String output = Args.req(a, "output");
        String group = Args.req(a, "group");
        String stopFile = Args.req(a, "stop-file");
        String txnId = Args.opt(a, "transactional-id", "kproxy-ctp-" + System.nanoTime());
        long maxRuntimeMs = Long.parseLong(Args.opt(a, "max-runtime-ms", "600000"));
        String requestTimeout = Args.opt(a, "request-timeout-ms", "5000");
        deadline = T0 + maxRuntimeMs * 1_000_000L;

        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Args.opt(a, "max-poll-records", "100"));
        c.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, requestTimeout);
        c.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, "kproxy-ctp-consumer");
        Args.properties(a, "consumer-property", c);

        producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        producerProps.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        producerProps.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, requestTimeout);
        producerProps.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, Args.opt(a, "delivery-timeout-ms", "30000"));
        producerProps.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Args.opt(a, "transaction-timeout-ms", "30000"));
        producerProps.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Args.opt(a, "max-block-ms", "15000"));
        producerProps.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        producerProps.put(ProducerConfig.CLIENT_ID_CONFIG, "kproxy-ctp-producer");
        Args.properties(a, "producer-property", producerProps);

        long records = 0, committedTxns = 0, abortedTxns = 0;
        String fatal = null;
        Map<String, Double> consumerConn = new HashMap<>(), producerConn = new HashMap<>();
        KafkaProducer<String, String> producer = null;
        long lastProgress = System.nanoTime();
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
            producer = newProducer();
            consumer.subscribe(List.of(input), new ConsumerRebalanceListener() {
                @Override public void onPartitionsRevoked(Collection<TopicPartition> parts) { }
                @Override public void onPartitionsAssigned(Collection<TopicPartition> parts) { rebalances++; }
            });
            int inputPartitions = retry(() -> consumer.partitionsFor(input, Duration.ofSeconds(10)).size(), "partitionsFor");
            System.out.println("started: producer initialised, " + inputPartitions + " input partitions");
            System.out.flush();
            while (true) {
                if (System.nanoTime() >= deadline) throw new IllegalStateException("--max-runtime-ms passed before the job caught up");
                if (System.nanoTime() - lastProgress >= 5_000_000_000L) {
                    lastProgress = System.nanoTime();
                    System.out.println("progress records=" + records + " committed=" + committedTxns + " aborted=" + abortedTxns
                                       + " restarts=" + restarts);
                    System.out.flush();
                }
                if (Files.exists(Paths.get(stopFile)) && caughtUp(consumer, input, inputPartitions)) break;
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                if (batch.isEmpty()) continue;
                boolean commitCalled = false;
                try {
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                    for (ConsumerRecord<String, String> r : batch) {
                        producer.send(new ProducerRecord<>(output, r.key(), transform(r)));
                        next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                    commitCalled = true;
                    KafkaProducer<String, String> p = producer;
                    retryOnTimeout(p::commitTransaction, "commit");
                    committedTxns++;
                    records += batch.count();
                } catch (Exception e) {
                    boolean replace = isFatal(e);
                    note(e, commitCalled ? "at commit" : "before commit");
                    if (!replace) {
                        try {
                            KafkaProducer<String, String> p = producer;
                            retryOnTimeout(p::abortTransaction, "abort");
                            abortedTxns++;
                        } catch (Exception e2) {
                            note(e2, "at abort");
                            replace = true;
                        }
                    }
                    if (replace) {
                        producer.close(Duration.ZERO);
                        producer = null;
                        restarts++;
                        producer = newProducer();
                    }
                    rewind(consumer);
                }
            }
            consumerConn = ClientMetrics.connectionCounters(consumer.metrics(), "consumer-metrics");
            producerConn = ClientMetrics.connectionCounters(producer.metrics(), "producer-metrics");
        } catch (Exception e) {
            fatal = e.getClass().getName() + ": " + e.getMessage();
        } finally {
            if (producer != null) producer.close(Duration.ofSeconds(5));
        }
        boolean ok = fatal == null;

        StringBuilder js = new StringBuilder("{");
        js.append("\"ok\":").append(ok);
        js.append(",\"input\":").append(Json.q(input));
        js.append(",\"output\":").append(Json.q(output));
        js.append(",\"transactional_id\":").append(Json.q(txnId));
        js.append(",\"records\":").append(records);
        js.append(",\"transactions_committed\":").append(committedTxns);
        js.append(",\"transactions_aborted\":").append(abortedTxns);
        js.append(",\"producer_restarts\":").append(restarts);
        js.append(",\"commit_retries\":").append(commitRetries);
        js.append(",\"abort_retries\":").append(abortRetries);
        js.append(",\"init_retries\":").append(initRetries);
        js.append(",\"rebalances\":").append(rebalances);
        js.append(",\"errors\":").append(Json.countMap(errors));
        js.append(",\"causes\":").append(Json.strList(new ArrayList<>(causes)));
        js.append(",\"consumer_connection_close_total\":").append(consumerConn.getOrDefault("connection-close-total", -1.0).longValue());
        js.append(",\"producer_connection_close_total\":").append(producerConn.getOrDefault("connection-close-total", -1.0).longValue());
        js.append(",\"elapsed_ms\":").append((System.nanoTime() - T0) / 1_000_000L);
        js.append(",\"error\":").append(fatal == null ? "null" : Json.q(fatal));
        js.append("}");
        System.out.println(js);
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }

    static String transform(ConsumerRecord<String, String> r) {
        String v = r.value() == null ? "" : r.value();
        return r.key() + "|T|" + v.toUpperCase(Locale.ROOT) + "|src=" + r.partition() + "@" + r.offset();
    }

    /** All input partitions assigned and every position at its end offset (the last stable
     *  offset under read_committed): everything written so far was processed and committed. */
    static boolean caughtUp(KafkaConsumer<String, String> consumer, String input, int partitions) {
        Set<TopicPartition> assigned = consumer.assignment();
        if (assigned.size() < partitions) return false;
        Map<TopicPartition, Long> ends;
        try {
            ends = consumer.endOffsets(assigned, Duration.ofSeconds(10));
        } catch (TimeoutException e) {
            note(e, "endOffsets");
            return false;
        }
        for (TopicPartition tp : assigned) {
            if (consumer.position(tp, Duration.ofSeconds(10)) < ends.get(tp)) return false;
        }
        return true;
    }

    /** Back to the group's committed offsets (Kafka's example: resetToLastCommittedPositions). */
    static void rewind(KafkaConsumer<String, String> consumer) {
        Set<TopicPartition> assigned = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed =
            retry(() -> consumer.committed(assigned, Duration.ofSeconds(10)), "committed");
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata om = committed.get(tp);
            if (om != null) consumer.seek(tp, om.offset());
            else consumer.seekToBeginning(List.of(tp));
        }
    }

    static KafkaProducer<String, String> newProducer() {
        KafkaProducer<String, String> p = new KafkaProducer<>(producerProps, new StringSerializer(), new StringSerializer());
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
                note(e, "retrying " + what);
                if (System.nanoTime() >= deadline) throw e;
                switch (what) {
                    case "commit": commitRetries++; break;
                    case "abort": abortRetries++; break;
                    default: initRetries++;
                }
            }
        }
    }

    static <T> T retry(Supplier<T> call, String what) {
        while (true) {
            try {
                return call.get();
            } catch (TimeoutException e) {
                note(e, "retrying " + what);
                if (System.nanoTime() >= deadline) throw e;
            }
        }
    }

    /** The fatal set of Kafka's example and the KafkaProducer javadoc. */
    static boolean isFatal(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof ProducerFencedException || c instanceof OutOfOrderSequenceException
                    || c instanceof AuthorizationException || c instanceof UnsupportedVersionException
                    || c instanceof FencedInstanceIdException) return true;
            if (c.getCause() == c) break;
        }
        return false;
    }

    static void note(Throwable e, String where) {
        errors.merge(e.getClass().getName(), 1, Integer::sum);
        StringBuilder b = new StringBuilder(where).append(": ");
        int depth = 0;
        for (Throwable c = e; c != null && depth < 4; c = c.getCause(), depth++) {
            if (depth > 0) b.append(" <- ");
            String m = String.valueOf(c.getMessage());
            b.append(c.getClass().getSimpleName()).append(": ").append(m.length() > 160 ? m.substring(0, 160) : m);
            if (c.getCause() == c) break;
        }
        if (causes.size() < 20) causes.add(b.toString());
        System.out.println("error " + b);
        System.out.flush();
    }
}
