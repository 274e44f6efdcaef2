// Transactional producer for kproxy's integration tests. Run (compiled with Args.java, Json.java,
// ClientMetrics.java; see clients.py):
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' TxnProducer \
//        --bootstrap 127.0.0.1:9092 --topic orders --records 1000 --transactions 10
//
// Writes --records records in --transactions transactions (records spread evenly, the last
// transaction takes the remainder). Record i has key "<key-prefix><i>" and value
// "<key>|<txn>|<padding>", so a consumer can check content and spot duplicates. With
// --abort-every K every K-th transaction (1-based) is aborted instead of committed; its
// records do not count as committed and a read_committed consumer must never see them.
// Prints one JSON summary line on stdout; exit code 0 only if nothing failed.
//
// For the transaction observatory check (test_transaction_observatory_eos.py):
//   --spread-partitions true   transaction t writes to explicit partitions: the 1 + (t-1) % P
//                              partitions (t-1) % P, (t-1+1) % P, ... (P = the topic's partition
//                              count), records round-robin over them in ascending order with
//                              partition 0 last (so the AddPartitionsToTxn naming 0 is the
//                              transaction's last), so the partitions differ from one transaction
//                              to the next
//   --abort-on-error true      an error inside a transaction (a failed send, flush or commit
//                              that is not fatal) makes the producer abort that transaction and
//                              go on with the next one, instead of stopping
//   --report-transactions true the summary lists every transaction: {"n", "outcome", "cause"
//                              ("client" for --abort-every, else the root exception's class),
//                              "partitions" (those its records were sent to), "records"}
//
// Pacing, for a test that acts while the producer runs (test_sni_gateway.py's drain):
//   --pause-ms N               sleeps N ms after each transaction's commit or abort
//   --progress true            prints "txn N committed|aborted" on stdout after each transaction
// The summary also has the client's connection counters (connection_creation_total,
// connection_close_total: ClientMetrics.java), proof that it saw disconnects.
//
// Options: --bootstrap --topic --records --transactions --transactional-id --key-prefix
//          --value-bytes --abort-every --timeout-ms (per transaction / init)
//          --spread-partitions --abort-on-error --report-transactions --pause-ms --progress
//          --security-protocol --sasl-mechanism (PLAIN|SCRAM-SHA-256|SCRAM-SHA-512)
//          --sasl-user --sasl-password  --property key=value (repeatable, any producer config)
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnProducer {
    public static void main(String[] argv) {
        Map<String, List<String>> a = Args.parse(argv);
        String bootstrap = Args.req(a, "bootstrap");
        String topic = Args.req(a, "topic");
        int records = Integer.parseInt(Args.opt(a, "records", "1000"));
        int txns = Integer.parseInt(Args.opt(a, "transactions", "10"));
        String txnId = Args.opt(a, "transactional-id", "kproxy-test-" + System.nanoTime());
        String keyPrefix = Args.opt(a, "key-prefix", "k-");
        int valueBytes = Integer.parseInt(Args.opt(a, "value-bytes", "0"));
        int abortEvery = Integer.parseInt(Args.opt(a, "abort-every", "0"));
        long timeoutMs = Long.parseLong(Args.opt(a, "timeout-ms", "60000"));
        boolean spread = Boolean.parseBoolean(Args.opt(a, "spread-partitions", "false"));
        boolean abortOnError = Boolean.parseBoolean(Args.opt(a, "abort-on-error", "false"));
        boolean report = Boolean.parseBoolean(Args.opt(a, "report-transactions", "false"));
        long pauseMs = Long.parseLong(Args.opt(a, "pause-ms", "0"));
        boolean progress = Boolean.parseBoolean(Args.opt(a, "progress", "false"));
        if (txns < 1 || records < 0) Args.die("--transactions must be >= 1 and --records >= 0");

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(timeoutMs));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(Math.max(timeoutMs, 30000)));
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "kproxy-txn-producer");
        Args.security(a, p);
        Args.properties(a, p);

        String padding = "x".repeat(Math.max(0, valueBytes));
        long t0 = System.nanoTime();
        int committedTxns = 0, abortedTxns = 0, committedRecords = 0, abortedRecords = 0;
        Map<Integer, Integer> perPartition = new TreeMap<>();
        Map<String, Integer> errorAborts = new TreeMap<>();
        List<String> history = new ArrayList<>();
        String error = null;
        Map<String, Double> conn = new HashMap<>();
        int perTxn = records / txns;
        int next = 0;
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            int partitionCount = spread ? producer.partitionsFor(topic).size() : 0;
            for (int t = 1; t <= txns; t++) {
                int n = (t == txns) ? records - next : perTxn;
                boolean abort = abortEvery > 0 && t % abortEvery == 0;
                List<Integer> targets = new ArrayList<>();
                if (spread) {
                    for (int j = 0; j <= (t - 1) % partitionCount; j++) targets.add((t - 1 + j) % partitionCount);
                    // Partition 0 last: the AddPartitionsToTxn that names it is the transaction's last.
                    targets.sort((x, y) -> Boolean.compare(x == 0, y == 0) != 0 ? Boolean.compare(x == 0, y == 0) : Integer.compare(x, y));
                }
                TreeSet<Integer> sentTo = new TreeSet<>();
                producer.beginTransaction();
                Map<Integer, Integer> txnPartitions = new HashMap<>();
                String cause = null;
                int first = next;
                try {
                    List<Future<RecordMetadata>> sent = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        String key = keyPrefix + (first + i);
                        String value = key + "|" + t + "|" + padding;
                        if (spread) {
                            int partition = targets.get(i % targets.size());
                            sentTo.add(partition);
                            sent.add(producer.send(new ProducerRecord<>(topic, partition, key, value)));
                        } else {
                            sent.add(producer.send(new ProducerRecord<>(topic, key, value)));
                        }
                    }
                    producer.flush();
                    for (Future<RecordMetadata> f : sent) {
                        RecordMetadata md = f.get(timeoutMs, TimeUnit.MILLISECONDS);
                        txnPartitions.merge(md.partition(), 1, Integer::sum);
                        sentTo.add(md.partition());
                    }
                    if (!abort) producer.commitTransaction();
                } catch (Exception e) {
                    Throwable root = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                    if (!abortOnError || fatal(root)) throw e;
                    while (root.getCause() != null && root instanceof KafkaException
                           && root.getClass() == KafkaException.class) root = root.getCause();
                    cause = root.getClass().getSimpleName();
                }
                next = first + n;
                if (cause != null) {
                    // The transaction failed: abort it (an abortable error) and go on.
                    producer.abortTransaction();
                    abortedTxns++;
                    abortedRecords += n;
                    errorAborts.merge(cause, 1, Integer::sum);
                } else if (abort) {
                    producer.abortTransaction();
                    abortedTxns++;
                    abortedRecords += n;
                    cause = "client";
                } else {
                    committedTxns++;
                    committedRecords += n;
                    txnPartitions.forEach((k, v) -> perPartition.merge(k, v, Integer::sum));
                }
                if (progress) {
                    System.out.println("txn " + t + " " + (cause == null ? "committed" : "aborted"));
                    System.out.flush();
                }
                if (pauseMs > 0) Thread.sleep(pauseMs);
                if (report) {
                    history.add("{\"n\":" + t + ",\"outcome\":" + Json.q(cause == null ? "committed" : "aborted")
                                + ",\"cause\":" + Json.q(cause) + ",\"partitions\":" + sentTo + ",\"records\":" + n + "}");
                }
            }
            conn = ClientMetrics.connectionCounters(producer.metrics(), "producer-metrics");
        } catch (Exception e) {
            error = e.getClass().getName() + ": " + e.getMessage();
        }
        long elapsedMs = (System.nanoTime() - t0) / 1_000_000;

        StringBuilder js = new StringBuilder("{");
        js.append("\"ok\":").append(error == null);
        js.append(",\"topic\":").append(Json.q(topic));
        js.append(",\"transactional_id\":").append(Json.q(txnId));
        js.append(",\"records_committed\":").append(committedRecords);
        js.append(",\"records_aborted\":").append(abortedRecords);
        js.append(",\"transactions_committed\":").append(committedTxns);
        js.append(",\"transactions_aborted\":").append(abortedTxns);
        js.append(",\"key_prefix\":").append(Json.q(keyPrefix));
        js.append(",\"partitions\":").append(Json.partitionMap(perPartition));
        js.append(",\"error_aborts\":").append(Json.countMap(errorAborts));
        if (report) js.append(",\"transactions\":[").append(String.join(",", history)).append("]");
        js.append(",\"connection_creation_total\":").append(conn.getOrDefault("connection-creation-total", -1.0).longValue());
        js.append(",\"connection_close_total\":").append(conn.getOrDefault("connection-close-total", -1.0).longValue());
        js.append(",\"elapsed_ms\":").append(elapsedMs);
        js.append(",\"error\":").append(error == null ? "null" : Json.q(error));
        js.append("}");
        System.out.println(js);
        System.out.flush();
        System.exit(error == null ? 0 : 1);
    }

    /** Errors after which a transactional producer cannot go on (KafkaProducer's javadoc). */
    private static boolean fatal(Throwable e) {
        return e instanceof ProducerFencedException || e instanceof OutOfOrderSequenceException
            || e instanceof TransactionalIdAuthorizationException || e instanceof UnsupportedVersionException;
    }
}
