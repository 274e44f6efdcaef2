// Two transactional producers with the same transactional.id, the second fencing the first
// (KIP-98 zombie fencing), for kproxy's transaction tests. Run (compiled with Args.java and
// Json.java; see clients.py):
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' FencedTxnProducers \
//        --bootstrap 127.0.0.1:9092 --topic t --transactional-id T [--records 5]
//
// 1. producer A: initTransactions(), beginTransaction(), --records sends (key "fence-a-<i>"),
//    every send acknowledged: A's transaction is open;
// 2. producer B, same transactional.id: initTransactions() (the coordinator aborts A's
//    transaction and bumps the epoch: A is fenced);
// 3. A, the zombie: one more send (waited for), then commitTransaction(); each is expected to
//    fail with ProducerFencedException (PRODUCER_FENCED) or InvalidProducerEpochException
//    (INVALID_PRODUCER_EPOCH);
// 4. B: one transaction of --records records (key "fence-b-<i>"), committed.
// Prints one JSON line: ok (A's send and commit both failed as fenced, B committed),
// a_send_error / a_commit_error (the exception's class and cause chain, null if none),
// b_committed, b_error, and the wall-clock ms of each step. Exit code 0 only when ok.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringSerializer;

public class FencedTxnProducers {
    static Properties props;

    public static void main(String[] argv) {
        Map<String, List<String>> a = Args.parse(argv, Set.of("bootstrap", "topic", "transactional-id", "records"));
        String topic = Args.req(a, "topic");
        String txnId = Args.req(a, "transactional-id");
        int records = Integer.parseInt(Args.opt(a, "records", "5"));
        props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, Args.req(a, "bootstrap"));
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");

        String aSendError = null, aCommitError = null, bError = null, fatal = null;
        boolean bCommitted = false;
        long aOpenMs = 0, bInitMs = 0, aSendFailedMs = 0, bCommittedMs = 0;
        KafkaProducer<String, String> first = null, second = null;
        try {
            first = producer("kproxy-fenced-a");
            first.initTransactions();
            first.beginTransaction();
            sendAll(first, topic, "fence-a-", records);
            aOpenMs = System.currentTimeMillis();
            System.out.println("a open at_ms=" + aOpenMs);
            System.out.flush();

            second = producer("kproxy-fenced-b");
            second.initTransactions();  // fences the first
            bInitMs = System.currentTimeMillis();
            System.out.println("b initialized at_ms=" + bInitMs);
            System.out.flush();

            try {
                first.send(new ProducerRecord<>(topic, "fence-a-zombie", "fence-a-zombie|zombie|")).get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                aSendError = chain(e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e);
            }
            aSendFailedMs = System.currentTimeMillis();
            try {
                first.commitTransaction();
            } catch (Exception e) {
                aCommitError = chain(e);
            }

            try {
                second.beginTransaction();
                sendAll(second, topic, "fence-b-", records);
                second.commitTransaction();
                bCommitted = true;
                bCommittedMs = System.currentTimeMillis();
            } catch (Exception e) {
                bError = chain(e);
            }
        } catch (Exception e) {
            fatal = chain(e);
        } finally {
            if (first != null) first.close(Duration.ZERO);
            if (second != null) second.close(Duration.ofSeconds(5));
        }
        boolean ok = fatal == null && bCommitted && fenced(aSendError) && fenced(aCommitError);
        StringBuilder js = new StringBuilder("{");
        js.append("\"ok\":").append(ok);
        js.append(",\"transactional_id\":").append(Json.q(txnId));
        js.append(",\"records\":").append(records);
        js.append(",\"a_send_error\":").append(Json.q(aSendError));
        js.append(",\"a_commit_error\":").append(Json.q(aCommitError));
        js.append(",\"b_committed\":").append(bCommitted);
        js.append(",\"b_error\":").append(Json.q(bError));
        js.append(",\"a_open_ms\":").append(aOpenMs);
        js.append(",\"b_init_ms\":").append(bInitMs);
        js.append(",\"a_send_failed_ms\":").append(aSendFailedMs);
        js.append(",\"b_committed_ms\":").append(bCommittedMs);
        js.append(",\"error\":").append(Json.q(fatal));
        js.append("}");
        System.out.println(js);
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }

    static KafkaProducer<String, String> producer(String clientId) {
        Properties p = new Properties();
        p.putAll(props);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static void sendAll(KafkaProducer<String, String> producer, String topic, String prefix, int records) throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>(records);
        for (int i = 0; i < records; i++) {
            String key = prefix + i;
            sent.add(producer.send(new ProducerRecord<>(topic, key, key + "|fence|")));
        }
        producer.flush();
        for (Future<RecordMetadata> f : sent) f.get(30, TimeUnit.SECONDS);
    }

    /** True when `chain` (from chain()) names one of the two fencing exceptions. */
    static boolean fenced(String chain) {
        return chain != null && (chain.contains(ProducerFencedException.class.getSimpleName())
                                 || chain.contains(InvalidProducerEpochException.class.getSimpleName()));
    }

    /** "Class: message <- Class: message ..." over the cause chain. */
    static String chain(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (b.length() > 0) b.append(" <- ");
            b.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
            if (c.getCause() == c) break;
        }
        return b.toString();
    }
}
