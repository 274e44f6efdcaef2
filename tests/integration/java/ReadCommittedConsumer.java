// read_committed consumer for kproxy's integration tests. Run (compiled with Args.java, Json.java,
// ClientMetrics.java; see clients.py):
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' ReadCommittedConsumer \
//        --bootstrap 127.0.0.1:9092 --topic orders --expect 1000 --timeout-ms 60000
//
// Reads the topic from the beginning (all partitions assigned, no group; or --group G to
// subscribe as a member of group G and commit at the end) until it has --expect records or
// --timeout-ms passes; after reaching --expect it polls --linger-ms longer to catch extras.
// Checks each record: duplicate keys, and value must be "<key>|..." (as TxnProducer writes).
// Prints one JSON line: ok, count, unique_keys, duplicates, duplicate_examples,
// content_mismatches, partitions {partition: count}, timed_out, elapsed_ms, error.
// Exit code 0 only when ok (count == expect, no duplicates, no mismatches).
//
// --to-end (no group): reads up to the end offsets taken at start instead of up to --expect (under
// read_committed the end is the last stable offset); --expect is then optional (checked if given).
// --dump FILE writes every counted record as "partition<TAB>offset<TAB>key<TAB>value" lines, so a
// test can compare exact multisets. The summary also has the client's connection counters
// (connection_creation_total, connection_close_total) and "progress count=N" lines come once a
// second while it reads.
//
// Options: --bootstrap --topic --expect --timeout-ms --linger-ms --group --to-end --dump
//          --isolation (read_committed|read_uncommitted) --key-prefix (only count such keys)
//          --security-protocol --sasl-mechanism --sasl-user --sasl-password --property key=value
import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ReadCommittedConsumer {
    public static void main(String[] argv) {
        Map<String, List<String>> a = Args.parse(argv);
        String bootstrap = Args.req(a, "bootstrap");
        String topic = Args.req(a, "topic");
        boolean toEnd = Boolean.parseBoolean(Args.opt(a, "to-end", "false"));
        long expect = Long.parseLong(toEnd ? Args.opt(a, "expect", "-1") : Args.req(a, "expect"));
        String dump = Args.opt(a, "dump", null);
        long timeoutMs = Long.parseLong(Args.opt(a, "timeout-ms", "60000"));
        long lingerMs = Long.parseLong(Args.opt(a, "linger-ms", "1000"));
        String group = Args.opt(a, "group", null);
        String isolation = Args.opt(a, "isolation", "read_committed");
        String keyPrefix = Args.opt(a, "key-prefix", "");
        if (toEnd && group != null) Args.die("--to-end reads assigned partitions: no --group");

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "kproxy-read-committed-consumer");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        Args.security(a, p);
        Args.properties(a, p);

        long t0 = System.nanoTime();
        long deadline = t0 + timeoutMs * 1_000_000L;
        long count = 0, mismatches = 0, duplicates = 0;
        Map<String, Integer> seen = new HashMap<>();
        List<String> dupExamples = new ArrayList<>();
        List<String> badExamples = new ArrayList<>();
        Map<Integer, Long> perPartition = new TreeMap<>();
        boolean timedOut = false;
        boolean reachedEnd = false;
        Map<TopicPartition, Long> endOffsets = new HashMap<>();
        Map<String, Double> conn = new HashMap<>();
        String error = null;
        long lastProgress = t0;
        try (KafkaConsumer<String, String> c =
                 new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
             BufferedWriter out = dump == null ? null : Files.newBufferedWriter(Paths.get(dump), StandardCharsets.UTF_8)) {
            if (group != null) {
                c.subscribe(List.of(topic));
            } else {
                List<TopicPartition> tps = new ArrayList<>();
                while (tps.isEmpty()) {
                    long left = (deadline - System.nanoTime()) / 1_000_000L;
                    if (left <= 0) throw new RuntimeException("topic " + topic + " has no partitions (not found?)");
                    List<PartitionInfo> infos = c.partitionsFor(topic, Duration.ofMillis(Math.min(left, 5000)));
                    if (infos != null) for (PartitionInfo pi : infos) tps.add(new TopicPartition(topic, pi.partition()));
                    if (tps.isEmpty()) Thread.sleep(200);
                }
                c.assign(tps);
                c.seekToBeginning(tps);
                if (toEnd) endOffsets = c.endOffsets(tps, Duration.ofMillis(Math.max(1000, (deadline - System.nanoTime()) / 1_000_000L)));
            }
            long lingerUntil = Long.MAX_VALUE;
            while (true) {
                long now = System.nanoTime();
                if (toEnd && atEnd(c, endOffsets)) { reachedEnd = true; break; }
                if (now >= lingerUntil) break;
                if (now >= deadline) { timedOut = toEnd || count < expect; break; }
                if (now - lastProgress >= 1_000_000_000L) {
                    lastProgress = now;
                    System.out.println("progress count=" + count);
                    System.out.flush();
                }
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : recs) {
                    String k = r.key() == null ? "" : r.key();
                    if (!k.startsWith(keyPrefix)) continue;
                    count++;
                    perPartition.merge(r.partition(), 1L, Long::sum);
                    int n = seen.merge(k, 1, Integer::sum);
                    if (n > 1) {
                        duplicates++;
                        if (dupExamples.size() < 5) dupExamples.add(k + "@" + r.partition() + ":" + r.offset());
                    }
                    String v = r.value() == null ? "" : r.value();
                    if (out != null) out.write(r.partition() + "\t" + r.offset() + "\t" + k + "\t" + v + "\n");
                    if (!v.startsWith(k + "|")) {
                        mismatches++;
                        if (badExamples.size() < 5) badExamples.add(k + "@" + r.partition() + ":" + r.offset());
                    }
                }
                if (!toEnd && count >= expect && lingerUntil == Long.MAX_VALUE) {
                    lingerUntil = System.nanoTime() + lingerMs * 1_000_000L;
                }
            }
            if (group != null) c.commitSync(Duration.ofMillis(15000));
            conn = ClientMetrics.connectionCounters(c.metrics(), "consumer-metrics");
        } catch (Exception e) {
            error = e.getClass().getName() + ": " + e.getMessage();
        }
        long elapsedMs = (System.nanoTime() - t0) / 1_000_000;
        boolean ok = error == null && (toEnd ? reachedEnd && (expect < 0 || count == expect) : count == expect)
                     && duplicates == 0 && mismatches == 0;

        StringBuilder js = new StringBuilder("{");
        js.append("\"ok\":").append(ok);
        js.append(",\"topic\":").append(Json.q(topic));
        js.append(",\"isolation\":").append(Json.q(isolation));
        js.append(",\"expected\":").append(expect);
        js.append(",\"count\":").append(count);
        js.append(",\"unique_keys\":").append(seen.size());
        js.append(",\"duplicates\":").append(duplicates);
        js.append(",\"duplicate_examples\":").append(Json.strList(dupExamples));
        js.append(",\"content_mismatches\":").append(mismatches);
        js.append(",\"mismatch_examples\":").append(Json.strList(badExamples));
        js.append(",\"partitions\":").append(Json.partitionMap(perPartition));
        js.append(",\"timed_out\":").append(timedOut);
        if (toEnd) {
            js.append(",\"reached_end\":").append(reachedEnd);
            Map<Integer, Long> ends = new TreeMap<>();
            endOffsets.forEach((tp, off) -> ends.put(tp.partition(), off));
            js.append(",\"end_offsets\":").append(Json.partitionMap(ends));
        }
        js.append(",\"connection_creation_total\":").append(conn.getOrDefault("connection-creation-total", -1.0).longValue());
        js.append(",\"connection_close_total\":").append(conn.getOrDefault("connection-close-total", -1.0).longValue());
        js.append(",\"elapsed_ms\":").append(elapsedMs);
        js.append(",\"error\":").append(error == null ? "null" : Json.q(error));
        js.append("}");
        System.out.println(js);
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }

    /** True once the position of every partition reached its end offset taken at start. */
    static boolean atEnd(KafkaConsumer<String, String> c, Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (c.position(e.getKey(), Duration.ofMillis(5000)) < e.getValue()) return false;
        }
        return true;
    }
}
