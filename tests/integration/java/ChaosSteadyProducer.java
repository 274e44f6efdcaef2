// A producer that keeps sending, one record at a time, for the chaos tests that change fault
// rules while a client runs (turn a fault on and off through the admin API, no reconnect).
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' ChaosSteadyProducer \
//        --bootstrap 127.0.0.1:9092 --topic t --duration-ms 9000 [--interval-ms 50]
//
// Each record is sent and waited for (send().get()), then the next follows after --interval-ms,
// for --duration-ms counted from the first acknowledged record (announced by a "first send
// acknowledged" line, so a test knows the client is connected and running).
// Prints one JSON line: ok, sent, failed, and "sends": [[wall clock ms at send, latency ms,
// 0 | 1 for a failure], ...] so the test can line the client's latencies up with the moments it
// changed the rules. Exit code 0 only when no send failed.
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class ChaosSteadyProducer {
    public static void main(String[] argv) {
        Map<String, List<String>> a = Args.parse(argv, Set.of("bootstrap", "topic", "duration-ms", "interval-ms"));
        String bootstrap = Args.req(a, "bootstrap");
        String topic = Args.req(a, "topic");
        long durationMs = Long.parseLong(Args.opt(a, "duration-ms", "9000"));
        long intervalMs = Long.parseLong(Args.opt(a, "interval-ms", "50"));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "kproxy-steady-producer");
        List<long[]> sends = new ArrayList<>();
        int failed = 0;
        String error = null;
        long end = Long.MAX_VALUE;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; System.currentTimeMillis() < end; i++) {
                long at = System.currentTimeMillis();
                long t0 = System.nanoTime();
                boolean ok = true;
                try {
                    producer.send(new ProducerRecord<>(topic, "steady-" + i, "v" + i)).get(20, TimeUnit.SECONDS);
                } catch (Exception e) {
                    ok = false;
                    failed++;
                    error = e.toString();
                }
                sends.add(new long[] {at, (System.nanoTime() - t0) / 1_000_000, ok ? 0 : 1});
                if (i == 0) {
                    end = System.currentTimeMillis() + durationMs;
                    System.out.println("first send acknowledged");
                    System.out.flush();
                }
                Thread.sleep(intervalMs);
            }
        } catch (InterruptedException e) {
            error = e.toString();
        }
        StringBuilder b = new StringBuilder("{\"ok\":").append(failed == 0 && error == null);
        b.append(",\"sent\":").append(sends.size()).append(",\"failed\":").append(failed);
        b.append(",\"error\":").append(Json.q(error));
        b.append(",\"sends\":[");
        for (int i = 0; i < sends.size(); i++) {
            long[] s = sends.get(i);
            b.append(i == 0 ? "" : ",").append('[').append(s[0]).append(',').append(s[1]).append(',').append(s[2]).append(']');
        }
        System.out.println(b.append("]}"));
        System.exit(failed == 0 && error == null ? 0 : 1);
    }
}
