// Steady idempotent producer for kproxy's failure tests. Single-file program:
//
//   java -cp '.cache/kafka-4.4.0/libs/*' tests/integration/java/LoadProducer.java \
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
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
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
            conn = connectionCounters(producer.metrics(), "producer-metrics");
        } catch (Exception e) {
            fatal = e.getClass().getName() + ": " + e.getMessage();
        }
        long elapsedMs = (System.nanoTime() - t0) / 1_000_000;
        boolean ok = fatal == null && failed.get() == 0 && acked.get() == records;

        StringBuilder js = new StringBuilder("{");
        js.append("\"ok\":").append(ok);
        js.append(",\"topic\":").append(Args.q(topic));
        js.append(",\"records\":").append(records);
        js.append(",\"acked\":").append(acked.get());
        js.append(",\"failed\":").append(failed.get());
        js.append(",\"errors\":").append(Args.countMap(errors));
        js.append(",\"partitions\":").append(Args.intMap(perPartition));
        js.append(",\"connection_creation_total\":").append(conn.getOrDefault("connection-creation-total", -1.0).longValue());
        js.append(",\"connection_close_total\":").append(conn.getOrDefault("connection-close-total", -1.0).longValue());
        js.append(",\"elapsed_ms\":").append(elapsedMs);
        js.append(",\"error\":").append(fatal == null ? "null" : Args.q(fatal));
        js.append("}");
        System.out.println(js);
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }

    /** The client's selector counters (connections opened / closed over its whole life). */
    static Map<String, Double> connectionCounters(Map<MetricName, ? extends Metric> metrics, String group) {
        Map<String, Double> out = new HashMap<>();
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            MetricName n = e.getKey();
            if (!n.group().equals(group)) continue;
            if (n.name().equals("connection-close-total") || n.name().equals("connection-creation-total")) {
                Object v = e.getValue().metricValue();
                if (v instanceof Number) out.merge(n.name(), ((Number) v).doubleValue(), Double::sum);
            }
        }
        return out;
    }
}

/** Tiny argument parser and JSON helpers (kept in this file: single-file program). */
final class Args {
    static Map<String, List<String>> parse(String[] argv) {
        Map<String, List<String>> m = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            String k = argv[i];
            if (!k.startsWith("--")) die("unexpected argument: " + k);
            k = k.substring(2);
            String v;
            int eq = k.indexOf('=');
            if (eq >= 0) { v = k.substring(eq + 1); k = k.substring(0, eq); }
            else if (i + 1 < argv.length) v = argv[++i];
            else { die("missing value for --" + k); return m; }
            m.computeIfAbsent(k, x -> new ArrayList<>()).add(v);
        }
        return m;
    }
    static String req(Map<String, List<String>> a, String k) {
        String v = opt(a, k, null);
        if (v == null) die("missing --" + k);
        return v;
    }
    static String opt(Map<String, List<String>> a, String k, String def) {
        List<String> l = a.get(k);
        return l == null ? def : l.get(l.size() - 1);
    }
    static void properties(Map<String, List<String>> a, Properties p) {
        for (String kv : a.getOrDefault("property", List.of())) {
            int eq = kv.indexOf('=');
            if (eq <= 0) die("--property wants key=value, got " + kv);
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
    }
    static void die(String msg) {
        System.out.println("{\"ok\":false,\"error\":" + q("usage: " + msg) + "}");
        System.exit(2);
    }
    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c)); else b.append(c);
            }
        }
        return b.append('"').toString();
    }
    static String intMap(Map<Integer, Integer> m) {
        StringBuilder b = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<Integer, Integer> e : m.entrySet()) {
            if (!first) b.append(',');
            first = false;
            b.append('"').append(e.getKey()).append("\":").append(e.getValue());
        }
        return b.append('}').toString();
    }
    static String countMap(Map<String, Integer> m) {
        StringBuilder b = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, Integer> e : m.entrySet()) {
            if (!first) b.append(',');
            first = false;
            b.append(q(e.getKey())).append(':').append(e.getValue());
        }
        return b.append('}').toString();
    }
}
