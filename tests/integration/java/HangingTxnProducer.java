// A transactional producer that begins a transaction, writes records into it and then hangs,
// neither committing nor aborting, until it is killed: the hanging transaction (KIP-664) of
// kproxy's transaction tests. Run (compiled with Args.java and Json.java; see clients.py):
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' HangingTxnProducer \
//        --bootstrap 127.0.0.1:9092 --topic t --transactional-id T \
//        [--records 10] [--transaction-timeout-ms 5000]
//
// initTransactions(), beginTransaction(), --records sends (key "hang-<i>"), flush and every send
// acknowledged; then it prints one line
//   hanging transactional_id=T records=N at_ms=<wall clock ms>
// and sleeps until it is killed (the test kills it with SIGKILL: nothing is ended cleanly). The
// coordinator aborts the transaction once --transaction-timeout-ms has passed.
// On a failure before that line it prints a JSON summary {"ok":false,"error":...} and exits 1.
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public class HangingTxnProducer {
    public static void main(String[] argv) throws InterruptedException {
        Map<String, List<String>> a =
            Args.parse(argv, Set.of("bootstrap", "topic", "transactional-id", "records", "transaction-timeout-ms"));
        String bootstrap = Args.req(a, "bootstrap");
        String topic = Args.req(a, "topic");
        String txnId = Args.req(a, "transactional-id");
        int records = Integer.parseInt(Args.opt(a, "records", "10"));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Args.opt(a, "transaction-timeout-ms", "5000"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "kproxy-hanging-producer");
        // Never closed: the process is killed while the transaction is open.
        KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        try {
            producer.initTransactions();
            producer.beginTransaction();
            List<Future<RecordMetadata>> sent = new ArrayList<>(records);
            for (int i = 0; i < records; i++) {
                String key = "hang-" + i;
                sent.add(producer.send(new ProducerRecord<>(topic, key, key + "|hanging|")));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) f.get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            System.out.println("{\"ok\":false,\"error\":" + Json.q(e.getClass().getName() + ": " + e.getMessage()) + "}");
            System.out.flush();
            System.exit(1);
        }
        System.out.println("hanging transactional_id=" + txnId + " records=" + records + " at_ms=" + System.currentTimeMillis());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
