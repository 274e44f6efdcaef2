// Steady idempotent producer for kproxy's failure tests. Run (compiled with Args.java, Json.java,
// ClientMetrics.java; see clients.py):
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' LoadProducer \
//        --bootstrap 127.0.0.1:9092 --topic orders --records 6000 --rate 300
//
// Sends --records records at about --rate records per second (0 = as fast as it can), so the
// traffic spans a broker or proxy failure the test causes meanwhile. acks=all and idempotence on:
// a record whose request was cut by a disconnect is retried with the same sequence number and
// written once (KIP-98). Record i has key "<key-prefix><i>" and value "<key>|load|<i>" (the
// layout ReadCommittedConsumer checks). Prints "progress acked=N" once a second and one JSON
// summary line at the end: ok, acked, failed, error classes, the client's own connection
// counters (connection-creation-total / connection-close-total: proof that it saw disconnects),
// elapsed_ms. Exit code 0 only if every record was acknowledged.
//
// Options: --bootstrap --topic --records --rate --key-prefix --delivery-timeout-ms
//          --request-timeout-ms --property key=value (repeatable, any producer config)
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class LoadProducer {
    public static void main(String[] argv) throws Exception {
        Map<String, List<String>> a = Args.parse(argv);
        String bootstrap = Args.req(a, "bootstrap");
        String topic = Args.req(a, "topic");
        int records = Integer.parseInt(Args.opt(a, "records", "1000"));
        double rate = Double.parseDouble(Args.opt(a, "rate", "0"));
        String keyPrefix = Args.opt(a, "key-prefix", "load-");
        String deliveryTimeout = Args.opt(a, "delivery-timeout-ms", "120000");
        String requestTimeout = Args.opt(a, "request-timeout-ms", "10000");

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, deliveryTimeout);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, requestTimeout);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, deliveryTimeout);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "kproxy-load-producer");
        Args.properties(a, p);

        AtomicLong acked = new AtomicLong(), failed = new AtomicLong();
        Map<String, Integer> errors = new TreeMap<>();
        Map<Integer, Integer> perPartition = new TreeMap<>();
        String fatal = null;
        long t0 = System.nanoTime();
        long lastProgress = t0;
        Map<String, Double> conn = new HashMap<>();
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < records; i++) {
                if (rate > 0) {
                    long due = t0 + (long) (i * 1e9 / rate);
                    long wait = due - System.nanoTime();
                    if (wait > 0) Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
                }
                String key = keyPrefix + i;
                producer.send(new ProducerRecord<>(topic, key, key + "|load|" + i), (md, e) -> {
                    if (e == null) {
                        acked.incrementAndGet();
                        synchronized (perPartition) { perPartition.merge(md.partition(), 1, Integer::sum); }
                    } else {
                        failed.incrementAndGet();
                        synchronized (errors) { errors.merge(e.getClass().getName(), 1, Integer::sum); }
                    }
                });
                long now = System.nanoTime();
                if (now - lastProgress >= 1_000_000_000L) {
                    lastProgress = now;
                    System.out.println("progress sent=" + (i + 1) + " acked=" + acked.get() + " failed=" + failed.get());
                    System.out.flush();
                }
            }
            producer.flush();
            conn = ClientMetrics.connectionCounters(producer.metrics(), "producer-metrics");
        } catch (Exception e) {
            fatal = e.getClass().getName() + ": " + e.getMessage();
        }
        long elapsedMs = (System.nanoTime() - t0) / 1_000_000;
        boolean ok = fatal == null && failed.get() == 0 && acked.get() == records;

        StringBuilder js = new StringBuilder("{");
        js.append("\"ok\":").append(ok);
        js.append(",\"topic\":").append(Json.q(topic));
        js.append(",\"records\":").append(records);
        js.append(",\"acked\":").append(acked.get());
        js.append(",\"failed\":").append(failed.get());
        js.append(",\"errors\":").append(Json.countMap(errors));
        js.append(",\"partitions\":").append(Json.partitionMap(perPartition));
        js.append(",\"connection_creation_total\":").append(conn.getOrDefault("connection-creation-total", -1.0).longValue());
        js.append(",\"connection_close_total\":").append(conn.getOrDefault("connection-close-total", -1.0).longValue());
        js.append(",\"elapsed_ms\":").append(elapsedMs);
        js.append(",\"error\":").append(fatal == null ? "null" : Json.q(fatal));
        js.append("}");
        System.out.println(js);
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }
}
