// Conformance verifier (issue #31): reads one topic read_committed to its end and judges a
// driver's account of which transactions committed. Classes and their meaning: README.md here.
//
//   run --bootstrap B --topic T --account ACCOUNT.json [--timeout-s 60] [--driver-exit CODE]
//       [--driver-timed-out] [--save-read READ.json]
//   run --classify-only ACCOUNT.json READ.json [--driver-exit CODE] [--driver-timed-out]
//
// ACCOUNT.json: the driver's stdout (its last line that is a JSON object is the account) or just
// that object; missing or empty when the driver printed none. READ.json (classify-only, and what
// --save-read writes): {"records": [{"partition": p, "offset": o, "key": "..."} or "key", ...],
// "stuck_partitions": [p, ...]} or just the records list; records in read order.
// Prints one JSON line; exit 0 when it judged (whatever the class), 2 on a usage error or when it
// could not read the topic (class "verifier error").
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Verifier {
    static final ObjectMapper JSON = new ObjectMapper();
    static final int SHOW = 20;

    /** One record read: partition, offset, key (null keys are read as ""). */
    record Rec(int partition, long offset, String key) {}

    /** What was read: the records in read order, and the partitions whose last stable offset
     *  never reached their high watermark within the timeout (a transaction left open). */
    record Read(List<Rec> records, List<Integer> stuckPartitions, boolean topicFound) {}

    public static void main(String[] argv) {
        try {
            System.exit(run(argv));
        } catch (IllegalArgumentException e) {
            System.err.println("verifier: " + e.getMessage());
            System.exit(2);
        }
    }

    static int run(String[] argv) {
        Map<String, String> o = new HashMap<>();
        String accountFile = null, readFile = null;
        boolean timedOut = false;
        for (int k = 0; k < argv.length; k++) {
            String a = argv[k];
            if (a.equals("--driver-timed-out")) { timedOut = true; continue; }
            if (a.equals("--classify-only")) {
                if (k + 2 >= argv.length) throw new IllegalArgumentException("--classify-only ACCOUNT.json READ.json");
                accountFile = argv[++k];
                readFile = argv[++k];
                continue;
            }
            if (!a.startsWith("--") || k + 1 >= argv.length) throw new IllegalArgumentException("expected --name value, got " + a);
            o.put(a.substring(2), argv[++k]);
        }
        Integer driverExit = o.containsKey("driver-exit") ? Integer.valueOf(o.get("driver-exit")) : null;
        Read read;
        JsonNode account;
        if (readFile != null) {
            account = loadAccount(accountFile);
            read = parseRead(readText(readFile));
        } else {
            for (String req : List.of("bootstrap", "topic", "account"))
                if (!o.containsKey(req)) throw new IllegalArgumentException("--" + req + " is required");
            account = loadAccount(o.get("account"));
            double timeoutS = Double.parseDouble(o.getOrDefault("timeout-s", "60"));
            try {
                // Without an account the class is crashed or stuck whatever the topic holds: no read.
                read = account == null ? new Read(List.of(), List.of(), true) : readTopic(o.get("bootstrap"), o.get("topic"), timeoutS);
            } catch (RuntimeException e) {
                ObjectNode err = JSON.createObjectNode();
                err.put("class", "verifier error");
                err.put("detail", "could not read topic " + o.get("topic") + ": " + e);
                System.out.println(err);
                return 2;
            }
            if (o.containsKey("save-read")) saveRead(read, o.get("save-read"));
        }
        System.out.println(classify(account, read, driverExit, timedOut));
        return 0;
    }

    // ------------------------------------------------------------------ classification (no broker)
    /** Judges `account` (null: the driver printed none) against what a read_committed reader saw. */
    static ObjectNode classify(JsonNode account, Read read, Integer driverExit, boolean driverTimedOut) {
        ObjectNode out = JSON.createObjectNode();
        String runId = account == null ? null : account.path("run_id").asText(null);
        int m = account == null ? 0 : account.path("records_per_txn").asInt(0);
        Set<Integer> committed = ints(account, "committed"), aborted = ints(account, "aborted"), unknown = ints(account, "unknown");

        Map<String, Integer> seen = new LinkedHashMap<>();
        Map<Integer, Set<Integer>> unknownSeen = new TreeMap<>();
        List<String> dirty = new ArrayList<>();
        int dirtyCount = 0, recordsRead = 0, orderViolations = 0;
        Map<String, Integer> lastJ = new HashMap<>();   // "partition/txn" -> highest j seen
        String prefix = runId == null ? null : runId + ":";
        for (Rec r : read.records()) {
            if (prefix == null || !r.key().startsWith(prefix)) continue;
            recordsRead++;
            boolean again = seen.merge(r.key(), 1, Integer::sum) > 1;
            int[] ij = parseKey(r.key().substring(prefix.length()), m);
            boolean listed = ij != null && (committed.contains(ij[0]) || aborted.contains(ij[0]) || unknown.contains(ij[0]));
            if (!listed || aborted.contains(ij[0])) {
                // An aborted transaction's record, or one of no transaction the account names.
                dirtyCount++;
                if (dirty.size() < SHOW && !dirty.contains(r.key())) dirty.add(r.key());
                continue;
            }
            if (unknown.contains(ij[0])) unknownSeen.computeIfAbsent(ij[0], x -> new TreeSet<>()).add(ij[1]);
            if (again) continue;   // a second copy is a duplicate, not an order violation
            String pt = r.partition() + "/" + ij[0];
            Integer last = lastJ.get(pt);
            if (last != null && ij[1] < last) orderViolations++;
            if (last == null || ij[1] > last) lastJ.put(pt, ij[1]);
        }
        List<String> duplicates = new ArrayList<>();
        int duplicateCount = 0;
        for (Map.Entry<String, Integer> e : seen.entrySet()) {
            if (e.getValue() > 1) {
                duplicateCount += e.getValue() - 1;
                if (duplicates.size() < SHOW) duplicates.add(e.getKey());
            }
        }
        List<String> missing = new ArrayList<>();
        int missingCount = 0;
        List<Integer> unknownPresent = new ArrayList<>();
        List<Integer> partialUnknown = new ArrayList<>();
        if (prefix != null) {
            for (int i : new TreeSet<>(committed)) {
                for (int j = 0; j < m; j++) {
                    String key = prefix + i + ":" + j;
                    if (!seen.containsKey(key)) {
                        missingCount++;
                        if (missing.size() < SHOW) missing.add(key);
                    }
                }
            }
            for (int i : new TreeSet<>(unknown)) {
                Set<Integer> js = unknownSeen.getOrDefault(i, Set.of());
                if (js.isEmpty()) continue;
                unknownPresent.add(i);
                if (js.size() == m) continue;
                partialUnknown.add(i);   // some but not all of its records: not all-or-nothing
                for (int j = 0; j < m; j++) {
                    if (js.contains(j)) continue;
                    missingCount++;
                    String key = prefix + i + ":" + j;
                    if (missing.size() < SHOW) missing.add(key);
                }
            }
        }

        boolean gaveUp = account != null && account.path("gave_up").asBoolean(false);
        String reason = account == null || account.path("give_up_reason").isNull() ? null : account.path("give_up_reason").asText();
        int nTxns = account == null ? 0 : account.path("transactions").asInt(0);
        int settled = committed.size() + aborted.size() + unknown.size();
        String exitNote = driverExit != null && driverExit != 0 ? " (driver exit " + driverExit + ")" : "";
        String cls, detail;
        if (account == null && !driverTimedOut) {
            cls = "crashed";
            detail = "the driver ended" + (driverExit == null ? "" : " with exit code " + driverExit) + " without printing an account";
        } else if (account == null) {
            cls = "stuck";
            detail = "the driver was stopped at its time limit without printing an account";
        } else if (gaveUp && "deadline".equals(reason)) {
            cls = "stuck";
            detail = "the driver gave up at its deadline after " + settled + " of " + nTxns + " transactions had an outcome ("
                     + committed.size() + " committed)" + exitNote;
        } else if (!read.stuckPartitions().isEmpty()) {
            cls = "stuck";
            detail = "the last stable offset of partition(s) " + read.stuckPartitions()
                     + " stayed below the high watermark until the verifier's timeout: a transaction was left open" + exitNote;
        } else if (dirtyCount > 0) {
            cls = "dirty read";
            detail = dirtyCount + " record(s) of transactions the driver reported aborted (or never reported) are visible to read_committed" + exitNote;
        } else if (duplicateCount > 0) {
            cls = "duplicates";
            detail = duplicateCount + " extra cop(y/ies) of " + countDup(seen) + " key(s) were read" + exitNote;
        } else if (missingCount > 0) {
            cls = "loss";
            detail = missingCount + " record(s) missing: of transactions reported committed"
                     + (read.topicFound() ? "" : " (the topic does not exist)")
                     + (partialUnknown.isEmpty() ? "" : ", or partly visible transactions of unknown outcome " + partialUnknown) + exitNote;
        } else if (orderViolations > 0) {
            cls = "reordered";
            detail = orderViolations + " record(s) of one transaction came before an earlier record of it in the same partition" + exitNote;
        } else if (gaveUp) {
            cls = "exact, gave up as documented";
            detail = "every committed transaction exactly once, nothing aborted visible; the driver gave up: " + reason + exitNote;
        } else {
            cls = "exact";
            detail = "all " + committed.size() + " committed transaction(s) exactly once, nothing aborted visible"
                     + (unknownPresent.isEmpty() && unknown.isEmpty() ? "" : "; unknown outcomes all-or-nothing") + exitNote;
        }
        out.put("class", cls);
        out.put("records_read", recordsRead);
        out.put("committed_expected", committed.size() * m);
        out.set("missing", strings(missing));
        out.put("missing_count", missingCount);
        out.put("duplicate_count", duplicateCount);
        out.set("duplicates", strings(duplicates));
        out.put("dirty_count", dirtyCount);
        out.set("dirty", strings(dirty));
        ArrayNode up = JSON.createArrayNode();
        unknownPresent.forEach(up::add);
        out.set("unknown_present", up);
        out.put("order_violations", orderViolations);
        ArrayNode sp = JSON.createArrayNode();
        read.stuckPartitions().forEach(sp::add);
        out.set("stuck_partitions", sp);
        out.put("topic_found", read.topicFound());
        out.put("detail", detail);
        return out;
    }

    static int countDup(Map<String, Integer> seen) {
        int n = 0;
        for (int c : seen.values()) if (c > 1) n++;
        return n;
    }

    /** "i:j" with integers i >= 0 and 0 <= j < m, else null. */
    static int[] parseKey(String rest, int m) {
        int colon = rest.indexOf(':');
        if (colon <= 0 || colon != rest.lastIndexOf(':')) return null;
        try {
            int i = Integer.parseInt(rest.substring(0, colon)), j = Integer.parseInt(rest.substring(colon + 1));
            return i >= 0 && j >= 0 && j < m ? new int[] {i, j} : null;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    static Set<Integer> ints(JsonNode account, String field) {
        Set<Integer> s = new HashSet<>();
        if (account != null) for (JsonNode n : account.path(field)) s.add(n.asInt());
        return s;
    }

    static ArrayNode strings(Collection<String> c) {
        ArrayNode a = JSON.createArrayNode();
        c.forEach(a::add);
        return a;
    }

    // ------------------------------------------------------------------ inputs
    /** The account: the last line of the file that parses as a JSON object; null if none. */
    static JsonNode loadAccount(String file) {
        String text;
        try {
            text = Files.readString(Path.of(file), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return null;
        }
        String[] lines = text.split("\n");
        for (int k = lines.length - 1; k >= 0; k--) {
            String l = lines[k].trim();
            if (!l.startsWith("{")) continue;
            try {
                JsonNode n = JSON.readTree(l);
                if (n != null && n.isObject()) return n;
            } catch (IOException e) {
                // not JSON: keep looking
            }
        }
        try {
            JsonNode n = JSON.readTree(text);   // a pretty-printed object
            return n != null && n.isObject() ? n : null;
        } catch (IOException e) {
            return null;
        }
    }

    static String readText(String file) {
        try {
            return Files.readString(Path.of(file), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read " + file + ": " + e);
        }
    }

    static Read parseRead(String text) {
        JsonNode root;
        try {
            root = JSON.readTree(text);
        } catch (IOException e) {
            throw new IllegalArgumentException("READ.json is not JSON: " + e.getMessage());
        }
        JsonNode recs = root.isArray() ? root : root.path("records");
        List<Rec> records = new ArrayList<>();
        long n = 0;
        for (JsonNode r : recs) {
            if (r.isTextual()) records.add(new Rec(0, n, r.asText()));
            else records.add(new Rec(r.path("partition").asInt(0), r.path("offset").asLong(n), r.path("key").asText("")));
            n++;
        }
        List<Integer> stuck = new ArrayList<>();
        for (JsonNode p : root.path("stuck_partitions")) stuck.add(p.asInt());
        return new Read(records, stuck, !root.path("topic_found").isBoolean() || root.path("topic_found").asBoolean());
    }

    static void saveRead(Read read, String file) {
        ObjectNode root = JSON.createObjectNode();
        ArrayNode a = root.putArray("records");
        for (Rec r : read.records()) a.addObject().put("partition", r.partition()).put("offset", r.offset()).put("key", r.key());
        ArrayNode s = root.putArray("stuck_partitions");
        read.stuckPartitions().forEach(s::add);
        root.put("topic_found", read.topicFound());
        try {
            Files.writeString(Path.of(file), root.toString() + "\n", StandardCharsets.UTF_8);
        } catch (IOException e) {
            System.err.println("verifier: cannot write " + file + ": " + e);
        }
    }

    // ------------------------------------------------------------------ the broker
    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "conformance-verifier-" + isolation);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000");
        p.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    /** Every partition of `topic` from the beginning to its end under read_committed (the last
     *  stable offset). First waits, up to timeoutS, until each partition's LSO reaches its high
     *  watermark (no transaction open); a partition where it never does is reported stuck and read
     *  to its LSO. The read itself then has another min(timeoutS, 45 s). */
    static Read readTopic(String bootstrap, String topic, double timeoutS) {
        long deadline = System.nanoTime() + (long) (timeoutS * 1e9);
        // A topic that does not exist (the driver never got to create it) reads as empty.
        long topicDeadline = System.nanoTime() + (long) (Math.min(timeoutS, 15) * 1e9);
        try (KafkaConsumer<byte[], byte[]> rc = consumer(bootstrap, "read_committed");
             KafkaConsumer<byte[], byte[]> ru = consumer(bootstrap, "read_uncommitted")) {
            List<TopicPartition> tps = new ArrayList<>();
            while (true) {
                List<PartitionInfo> infos = rc.partitionsFor(topic, Duration.ofSeconds(10));
                if (infos != null && !infos.isEmpty()) {
                    for (PartitionInfo i : infos) tps.add(new TopicPartition(topic, i.partition()));
                    break;
                }
                if (System.nanoTime() > topicDeadline) return new Read(List.of(), List.of(), false);
                sleep(200);
            }
            tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
            Map<TopicPartition, Long> lso, hw;
            while (true) {
                lso = rc.endOffsets(tps, Duration.ofSeconds(30));
                hw = ru.endOffsets(tps, Duration.ofSeconds(30));
                boolean open = false;
                for (TopicPartition tp : tps) if (lso.get(tp) < hw.get(tp)) open = true;
                if (!open || System.nanoTime() > deadline) break;
                sleep(250);
            }
            List<Integer> stuck = new ArrayList<>();
            for (TopicPartition tp : tps) if (lso.get(tp) < hw.get(tp)) stuck.add(tp.partition());
            final Map<TopicPartition, Long> end = lso;
            rc.assign(tps);
            rc.seekToBeginning(tps);
            List<Rec> records = new ArrayList<>();
            // The read after the wait: bounded by the timeout too, and by 45 s, so the whole run
            // stays within --timeout-s + 45 s plus the JVM's start (the runner allows + 60 s).
            long readDeadline = System.nanoTime() + (long) (Math.min(timeoutS, 45) * 1e9);
            Set<TopicPartition> left = new HashSet<>(tps);
            while (true) {
                left.removeIf(tp -> rc.position(tp, Duration.ofSeconds(30)) >= end.get(tp));
                if (left.isEmpty()) break;
                if (System.nanoTime() > readDeadline)
                    throw new IllegalStateException("read did not reach the end offsets within " + timeoutS + " s: " + left);
                for (ConsumerRecord<byte[], byte[]> r : rc.poll(Duration.ofMillis(500))) {
                    String key = r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
                    records.add(new Rec(r.partition(), r.offset(), key));
                }
            }
            return new Read(records, stuck, true);
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
