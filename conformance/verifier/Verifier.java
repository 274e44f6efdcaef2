// Conformance verifier (issues #31, #45): reads one topic to its end, read_committed and (for the
// producer ids, epochs and transaction markers) read_uncommitted, and judges a driver's account of
// which transactions committed. Classes and their meaning: README.md here.
//
//   run --bootstrap B --topic T --account ACCOUNT.json [--timeout-s 60] [--driver-exit CODE]
//       [--driver-timed-out] [--save-read READ.json] [--expect-run-id R] [--expect-transactions N]
//       [--expect-records-per-txn M] [--transaction-timeout-ms MS] [--abort-cleanup-ms MS]
//       [--min-committed-fraction F] [--fatal-table FILE] [--protocol 1|2] [--workload produce|ctp]
//       [--input-topic IN --group G] [--aborted-input-prefix P]
//   run --classify-only ACCOUNT.json READ.json [same options but --bootstrap/--topic/--save-read]
//
// ACCOUNT.json: the driver's stdout (its last line that is a JSON object is the account) or just
// that object; missing or empty when the driver printed none. READ.json (classify-only, and what
// --save-read writes): {"records": [{"partition": p, "offset": o, "key": "..."} or "key", ...],
// "stuck_partitions": [p, ...], "lso": {"p": o}, "log": [{"partition": p, "offset": o, "key": k,
// "pid": n, "epoch": e} or {"partition": p, "offset": o, "control": "COMMIT"|"ABORT", "pid": n,
// "epoch": e}, ...], "input": [{"partition": p, "offset": o, "key": k}, ...], "group_offsets":
// {"p": o}} or just the records list; records in read order. Without "log" atomicity is not
// checked; without "input" the consume-transform-produce offsets are not.
// Prints one JSON line; exit 0 when it judged (whatever the class), 2 on a usage error or when it
// could not read the topic (class "verifier error").
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
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
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.Records;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.FetchRequest;
import org.apache.kafka.common.requests.FetchResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Verifier {
    static final ObjectMapper JSON = new ObjectMapper();
    static final int SHOW = 20;
    /** Kafka's default transaction.abort.timed.out.transaction.cleanup.interval.ms (TransactionStateManagerConfig). */
    static final long DEFAULT_ABORT_CLEANUP_MS = 10_000;
    /** The Java client's default transaction.timeout.ms (ProducerConfig), used when the runner gave none. */
    static final long DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000;
    /** Fetch v12: the last version that names topics (v13+ uses topic ids; FetchRequest.json). */
    static final short FETCH_VERSION = 12;
    /** --workload ctp: a consume-transform-produce run (its output transactions hold several
     *  input transactions' records by design), also without --input-topic. */
    static boolean ctpWorkload;
    /** --aborted-input-prefix P (ctp): the input topic also holds aborted transactions keyed
     *  P:i:j; an output of one of them (key "RUNID:P:i:j") means the client's read_committed
     *  consumer returned an aborted record: a dirty read. Null: the input holds none. */
    static String abortedInputPrefix;

    /** One record read: partition, offset, key (null keys are read as ""). */
    record Rec(int partition, long offset, String key) {}

    /** One entry of the raw log (read_uncommitted, control batches included): a data record with
     *  its batch's producer id and epoch, or a transaction marker (control COMMIT / ABORT). */
    record LogEntry(int partition, long offset, String key, long pid, short epoch, String control) {}

    /** What was read: the records under read_committed in read order; the partitions whose last
     *  stable offset never reached their high watermark within the wait (a transaction left open);
     *  each partition's LSO; the raw log (null: not read); for a consume-transform-produce cell the
     *  input topic's records (read_committed) and the group's committed offsets (null: not read). */
    record Read(List<Rec> records, List<Integer> stuckPartitions, boolean topicFound, Map<Integer, Long> lso,
                List<LogEntry> log, List<Rec> input, Map<Integer, Long> groupOffsets) {
        Read(List<Rec> records, List<Integer> stuckPartitions, boolean topicFound) {
            this(records, stuckPartitions, topicFound, Map.of(), null, null, null);
        }
    }

    /** What the runner asked the driver for, and how to judge it (all optional). */
    record Expect(String runId, Integer transactions, Integer recordsPerTxn, double minCommittedFraction, JsonNode fatalTable,
                  Integer protocol) {}

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
        ctpWorkload = "ctp".equals(o.get("workload")) || o.containsKey("input-topic");
        abortedInputPrefix = o.get("aborted-input-prefix");
        Expect expect = new Expect(o.get("expect-run-id"),
                                   o.containsKey("expect-transactions") ? Integer.valueOf(o.get("expect-transactions")) : null,
                                   o.containsKey("expect-records-per-txn") ? Integer.valueOf(o.get("expect-records-per-txn")) : null,
                                   Double.parseDouble(o.getOrDefault("min-committed-fraction", "0.5")),
                                   loadFatalTable(o.get("fatal-table")),
                                   o.containsKey("protocol") ? Integer.valueOf(o.get("protocol")) : null);
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
            // Wait longer than a transaction the client left open can live: its timeout, plus the
            // coordinator's abort cleanup interval (the sweep that aborts timed-out transactions
            // runs that often), plus a margin for the markers' writes.
            long txnTimeoutMs = Long.parseLong(o.getOrDefault("transaction-timeout-ms", String.valueOf(DEFAULT_TRANSACTION_TIMEOUT_MS)));
            if (txnTimeoutMs <= 0) txnTimeoutMs = DEFAULT_TRANSACTION_TIMEOUT_MS;
            long cleanupMs = Long.parseLong(o.getOrDefault("abort-cleanup-ms", String.valueOf(DEFAULT_ABORT_CLEANUP_MS)));
            double waitS = Math.max(timeoutS, (txnTimeoutMs + cleanupMs) / 1000.0 + 10);
            try {
                // Without an account the class is crashed or stuck whatever the topic holds: no read.
                read = account == null ? new Read(List.of(), List.of(), true)
                                       : readTopic(o.get("bootstrap"), o.get("topic"), waitS, o.get("input-topic"), o.get("group"));
            } catch (RuntimeException e) {
                ObjectNode err = JSON.createObjectNode();
                err.put("class", "verifier error");
                err.put("detail", "could not read topic " + o.get("topic") + ": " + e);
                System.out.println(err);
                return 2;
            }
            if (o.containsKey("save-read")) saveRead(read, o.get("save-read"));
        }
        ObjectNode out = classify(account, read, driverExit, timedOut, expect);
        System.out.println(out);
        return 0;
    }

    // ------------------------------------------------------------------ classification (no broker)
    static ObjectNode classify(JsonNode account, Read read, Integer driverExit, boolean driverTimedOut) {
        return classify(account, read, driverExit, driverTimedOut, new Expect(null, null, null, 0.5, null, null));
    }

    /** Judges `account` (null: the driver printed none) against what was read. */
    static ObjectNode classify(JsonNode account, Read read, Integer driverExit, boolean driverTimedOut, Expect expect) {
        ObjectNode out = JSON.createObjectNode();
        String runId = account == null ? null : account.path("run_id").asText(null);
        int m = account == null ? 0 : account.path("records_per_txn").asInt(0);
        int nTxns = account == null ? 0 : account.path("transactions").asInt(0);
        boolean ctp = account != null && (account.path("workload").asText("").equals("ctp") || read.input() != null || ctpWorkload);
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
            // A consume-transform-produce account lists an input transaction only once all its
            // inputs went out; the outputs of partly done ones are judged by the group's offsets
            // (an output without its offset committed is "wrong offsets"), not as dirty.
            boolean ctpPartial = ctp && ij != null && !listed;
            if (ctpPartial) continue;   // a second copy still counts as a duplicate (seen above)
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
        // Outputs of the input's aborted transactions (--aborted-input-prefix): the cell's run id
        // (the account's, less its own ":PREFIX", when the runner named none) + ":P:".
        List<String> abortedInputsOut = new ArrayList<>();
        int abortedInputsOutCount = 0;
        if (ctp && abortedInputPrefix != null) {
            String base = expect.runId() != null ? expect.runId()
                          : runId != null && runId.contains(":") ? runId.substring(0, runId.lastIndexOf(':')) : null;
            String bad = base == null ? null : base + ":" + abortedInputPrefix + ":";
            for (Rec r : read.records()) {
                if (bad == null || !r.key().startsWith(bad)) continue;
                abortedInputsOutCount++;
                if (abortedInputsOut.size() < SHOW && !abortedInputsOut.contains(r.key())) abortedInputsOut.add(r.key());
            }
        }
        List<String> duplicates = new ArrayList<>();
        int duplicateCount = 0;
        for (Map.Entry<String, Integer> e : seen.entrySet()) {
            if (e.getValue() > 1) {
                duplicateCount += e.getValue() - 1;
                if (duplicates.size() < SHOW) duplicates.add(e.getKey());
            }
        }

        // The raw log: which commit made each key visible (a "commit unit": one producer's records
        // in one partition between two of its markers, ended by a COMMIT marker).
        Atomicity at = read.log() == null || prefix == null ? null : atomicity(read.log(), prefix, m, ctp);
        // Keys of committed transactions present in the log beyond a stuck partition's LSO under a
        // COMMIT marker: hidden from read_committed by a transaction left open before them, not lost.
        Set<String> hidden = new HashSet<>();
        if (at != null) {
            for (Map.Entry<String, Long> e : at.committedAt.entrySet()) {
                int p = at.partitionOf.get(e.getKey());
                Long lso = read.lso().get(p);
                if (read.stuckPartitions().contains(p) && lso != null && e.getValue() >= lso) hidden.add(e.getKey());
            }
        }

        List<String> missing = new ArrayList<>();
        int missingCount = 0, hiddenCount = 0;
        List<Integer> unknownPresent = new ArrayList<>();
        List<Integer> partialUnknown = new ArrayList<>();
        if (prefix != null) {
            for (int i : new TreeSet<>(committed)) {
                for (int j = 0; j < m; j++) {
                    String key = prefix + i + ":" + j;
                    if (seen.containsKey(key)) continue;
                    if (hidden.contains(key)) { hiddenCount++; continue; }
                    missingCount++;
                    if (missing.size() < SHOW) missing.add(key);
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
                    String key = prefix + i + ":" + j;
                    if (hidden.contains(key)) { hiddenCount++; continue; }
                    missingCount++;
                    if (missing.size() < SHOW) missing.add(key);
                }
            }
        }

        // Consume-transform-produce: the group's committed offsets against the outputs.
        Offsets offs = ctp && read.input() != null && read.groupOffsets() != null && prefix != null
                       ? offsets(read.input(), read.groupOffsets(), seen.keySet(), runId) : null;

        boolean gaveUp = account != null && account.path("gave_up").asBoolean(false);
        String reason = account == null || account.path("give_up_reason").isNull() ? null : account.path("give_up_reason").asText();
        String accountProblem = account == null ? null : accountProblem(account, expect, committed, aborted, unknown, gaveUp, ctp);
        int settled = committed.size() + aborted.size() + unknown.size();
        int progress = committed.size() + unknownPresent.size() - partialUnknown.size();
        String exitNote = driverExit != null && driverExit != 0 ? " (driver exit " + driverExit + ")" : "";
        JsonNode documented = gaveUp && reason != null && !"deadline".equals(reason) && account != null
                              ? documentedFatal(expect.fatalTable(), account.path("client").asText(""), reason, expect.protocol()) : null;

        // Every condition that holds, in order of precedence; the first is the class, the others
        // are listed in "also" (a stuck partition no longer hides a loss found in the same cell).
        List<String[]> found = new ArrayList<>();
        if (account == null && !driverTimedOut) {
            found.add(new String[] {"crashed", "the driver ended" + (driverExit == null ? "" : " with exit code " + driverExit) + " without printing an account"});
        } else if (account == null) {
            found.add(new String[] {"stuck", "the driver was stopped at its time limit without printing an account"});
        } else {
            // First: a consumer that returned aborted inputs also counted them as work done, so the
            // account's gaps and the missing outputs follow from it.
            if (abortedInputsOutCount > 0)
                found.add(new String[] {"dirty read", abortedInputsOutCount + " output(s) of input records whose transactions were aborted: "
                                        + "the client's read_committed consumer returned them (e.g. " + abortedInputsOut.get(0) + ")" + exitNote});
            if (accountProblem != null) found.add(new String[] {"bad account", accountProblem + exitNote});
            if (dirtyCount > 0)
                found.add(new String[] {"dirty read", dirtyCount + " record(s) of transactions the driver reported aborted (or never reported) are visible to read_committed" + exitNote});
            if (duplicateCount > 0) {
                String within = at == null ? "" : at.duplicateWithinCommit > 0
                        ? "; " + at.duplicateWithinCommit + " of the copies were written inside the same transaction as the first (one commit)"
                        : "; the copies came in other commits than the first";
                found.add(new String[] {"duplicates", duplicateCount + " extra cop(y/ies) of " + countDup(seen) + " key(s) were read" + within + exitNote});
            }
            if (missingCount > 0)
                found.add(new String[] {"loss", missingCount + " record(s) missing: of transactions reported committed"
                        + (read.topicFound() ? "" : " (the topic does not exist)")
                        + (partialUnknown.isEmpty() ? "" : ", or partly visible transactions of unknown outcome " + partialUnknown) + exitNote});
            if (at != null && !at.violations.isEmpty())
                found.add(new String[] {"not atomic", at.violations.size() + " transaction(s) became visible in more than one commit, or together with another: "
                        + String.join("; ", at.violations.subList(0, Math.min(5, at.violations.size()))) + exitNote});
            if (offs != null && offs.problems > 0)
                found.add(new String[] {"wrong offsets", "the group's committed offsets do not match the outputs: " + String.join("; ", offs.examples) + exitNote});
            if (orderViolations > 0)
                found.add(new String[] {"reordered", orderViolations + " record(s) of one transaction came before an earlier record of it in the same partition" + exitNote});
            if (gaveUp && "deadline".equals(reason))
                found.add(new String[] {"stuck", "the driver gave up at its deadline after " + settled + " of " + nTxns + " transactions had an outcome ("
                        + committed.size() + " committed)" + exitNote});
            if (!read.stuckPartitions().isEmpty())
                found.add(new String[] {"stuck", "the last stable offset of partition(s) " + read.stuckPartitions()
                        + " stayed below the high watermark for the verifier's whole wait: a transaction was left open"
                        + (hiddenCount > 0 ? " (" + hiddenCount + " committed record(s) behind it)" : "") + exitNote});
            if (!gaveUp && nTxns > 0 && progress < Math.ceil(expect.minCommittedFraction() * nTxns))
                found.add(new String[] {"no progress", "the driver did not give up but only " + progress + " of " + nTxns
                        + " transactions committed (fewer than " + (int) Math.round(expect.minCommittedFraction() * 100) + " %): "
                        + aborted.size() + " aborted, " + unknown.size() + " unknown" + exitNote});
            if (gaveUp && !"deadline".equals(reason)) {
                if (documented != null)
                    found.add(new String[] {"exact, gave up as documented", "every committed transaction exactly once, nothing aborted visible; the driver gave up: "
                            + reason + "; documented fatal: " + documented.path("doc").asText() + exitNote});
                else
                    found.add(new String[] {"gave up (undocumented)", "every committed transaction exactly once, nothing aborted visible, but the driver gave up on an error "
                            + "its client's documentation does not name as fatal for that call (conformance/verifier/documented-fatal.json): " + reason + exitNote});
            }
            if (found.isEmpty())
                found.add(new String[] {"exact", "all " + committed.size() + " committed transaction(s) exactly once, nothing aborted visible"
                        + (unknownPresent.isEmpty() && unknown.isEmpty() ? "" : "; unknown outcomes all-or-nothing")
                        + (at == null ? "" : "; each in one commit") + (offs == null ? "" : "; group offsets match the outputs") + exitNote});
        }
        String cls = found.get(0)[0];
        out.put("class", cls);
        out.put("records_read", recordsRead);
        out.put("committed_expected", committed.size() * m);
        out.set("missing", strings(missing));
        out.put("missing_count", missingCount);
        out.put("hidden_by_open_transaction", hiddenCount);
        out.put("duplicate_count", duplicateCount);
        out.set("duplicates", strings(duplicates));
        out.put("dirty_count", dirtyCount);
        if (abortedInputPrefix != null) {
            out.put("aborted_inputs_out_count", abortedInputsOutCount);
            out.set("aborted_inputs_out", strings(abortedInputsOut));
        }
        out.set("dirty", strings(dirty));
        ArrayNode up = JSON.createArrayNode();
        unknownPresent.forEach(up::add);
        out.set("unknown_present", up);
        out.put("order_violations", orderViolations);
        ArrayNode sp = JSON.createArrayNode();
        read.stuckPartitions().forEach(sp::add);
        out.set("stuck_partitions", sp);
        out.put("topic_found", read.topicFound());
        out.put("atomicity_checked", at != null);
        if (at != null) {
            out.set("not_atomic", strings(at.violations.subList(0, Math.min(SHOW, at.violations.size()))));
            out.put("commits", at.commitUnits);
            out.put("aborts", at.abortUnits);
            ObjectNode producers = out.putObject("producers");
            at.producers.forEach((pid, epochs) -> {
                ArrayNode a = producers.putArray(String.valueOf(pid));
                epochs.forEach(a::add);
            });
        }
        if (offs != null) {
            out.put("offsets_checked", true);
            out.set("offset_problems", strings(offs.examples));
            ObjectNode g = out.putObject("group_offsets");
            read.groupOffsets().forEach((p, v) -> g.put(String.valueOf(p), v));
            out.put("inputs", read.input().size());
        }
        out.put("progress", progress);
        if (gaveUp && reason != null && !"deadline".equals(reason)) {
            out.put("gave_up_documented", documented != null);
            if (documented != null) out.set("documented_by", documented);
        }
        ArrayNode also = JSON.createArrayNode();
        for (int k = 1; k < found.size(); k++) if (!found.get(k)[0].equals(cls) && !containsText(also, found.get(k)[0])) also.add(found.get(k)[0]);
        out.set("also", also);
        StringBuilder detail = new StringBuilder(found.get(0)[1]);
        for (int k = 1; k < found.size(); k++) detail.append("; also ").append(found.get(k)[0]).append(": ").append(found.get(k)[1]);
        out.put("detail", detail.toString());
        return out;
    }

    static boolean containsInt(JsonNode a, int v) {
        for (JsonNode n : a) if (n.asInt() == v) return true;
        return false;
    }

    static boolean containsText(ArrayNode a, String s) {
        for (JsonNode n : a) if (n.asText().equals(s)) return true;
        return false;
    }

    /** What is wrong with the account itself, or null: it must be for the run the runner started
     *  (run id, N, M), list each index at most once and only indexes 0..N-1, and, unless the driver
     *  gave up, give every transaction an outcome. A driver that gave up may leave out the indexes
     *  from the one in progress on (never begun, or abandoned before commit was asked for). */
    static String accountProblem(JsonNode account, Expect expect, Set<Integer> committed, Set<Integer> aborted,
                                 Set<Integer> unknown, boolean gaveUp, boolean ctp) {
        List<String> p = new ArrayList<>();
        String runId = account.path("run_id").asText(null);
        int n = account.path("transactions").asInt(-1), m = account.path("records_per_txn").asInt(-1);
        if (runId == null || runId.isEmpty()) p.add("no run_id");
        else if (expect.runId() != null && !(runId.equals(expect.runId()) || (ctp && runId.startsWith(expect.runId() + ":"))))
            p.add("run_id " + runId + ", the runner started " + expect.runId());
        if (expect.transactions() != null && n != expect.transactions()) p.add("transactions " + n + ", the runner asked for " + expect.transactions());
        if (expect.recordsPerTxn() != null && m != expect.recordsPerTxn()) p.add("records_per_txn " + m + ", the runner asked for " + expect.recordsPerTxn());
        for (String f : List.of("committed", "aborted", "unknown"))
            if (!account.path(f).isArray()) p.add("no " + f + " list");
        int listedTotal = account.path("committed").size() + account.path("aborted").size() + account.path("unknown").size();
        Set<Integer> all = new TreeSet<>();
        all.addAll(committed);
        all.addAll(aborted);
        all.addAll(unknown);
        if (all.size() != listedTotal) p.add("an index is listed twice (or in two lists)");
        Set<Integer> out = new TreeSet<>();
        for (int i : all) if (i < 0 || i >= n) out.add(i);
        if (!out.isEmpty()) p.add("index(es) " + out + " outside 0.." + (n - 1));
        List<Integer> none = new ArrayList<>();
        for (int i = 0; i < n; i++) if (!all.contains(i)) none.add(i);
        if (!gaveUp && !none.isEmpty()) p.add("the driver did not give up, but transaction(s) " + abbreviate(none) + " have no outcome");
        if (gaveUp && !ctp && !none.isEmpty() && !all.isEmpty() && none.get(0) < ((TreeSet<Integer>) all).last())
            p.add("transaction(s) " + abbreviate(none) + " have no outcome although later ones do");
        return p.isEmpty() ? null : "the account does not match the run: " + String.join("; ", p);
    }

    static String abbreviate(List<Integer> l) {
        return l.size() <= 10 ? l.toString() : l.subList(0, 10) + "... (" + l.size() + ")";
    }

    /** The documented-fatal table's entry for `client` whose pattern matches `reason`, or null. */
    static JsonNode documentedFatal(JsonNode table, String client, String reason, Integer protocol) {
        if (table == null) return null;
        for (JsonNode e : table.path("clients").path(client)) {
            if (e.has("protocols") && protocol != null && !containsInt(e.path("protocols"), protocol)) continue;
            String rx = e.path("reason").asText("");
            if (!rx.isEmpty() && Pattern.compile(rx).matcher(reason).find()) return e;
        }
        return null;
    }

    static JsonNode loadFatalTable(String file) {
        Path p = file != null ? Path.of(file) : defaultFatalTable();
        if (p == null || !Files.isRegularFile(p)) {
            if (file != null) throw new IllegalArgumentException("--fatal-table " + file + ": no such file");
            return null;
        }
        try {
            return JSON.readTree(Files.readString(p, StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new IllegalArgumentException("fatal table " + p + ": " + e.getMessage());
        }
    }

    static Path defaultFatalTable() {
        String root = System.getProperty("conformance.root");
        return root == null ? null : Path.of(root, "conformance", "verifier", "documented-fatal.json");
    }

    // ------------------------------------------------------------------ atomicity
    static final class Atomicity {
        final List<String> violations = new ArrayList<>();
        final Map<String, Long> committedAt = new HashMap<>();     // key -> offset of the COMMIT marker that made it visible
        final Map<String, Integer> partitionOf = new HashMap<>();
        final Map<Long, TreeSet<Integer>> producers = new TreeMap<>();   // pid -> epochs of the run's batches
        int commitUnits, abortUnits, duplicateWithinCommit;
    }

    /** Groups the run's records of the raw log into commit units: per partition and producer id,
     *  the data records since that producer's last marker, closed by its next COMMIT or ABORT
     *  marker (Kafka writes one marker per partition per transaction end: WriteTxnMarkers).
     *  Transaction i is atomic when all its committed records are in commit units of one producer
     *  id and epoch, at most one per partition, none holding another transaction's records (under
     *  transaction.version 2 each transaction has an epoch of its own, KIP-890, so units of two
     *  commits never share one; under version 1 the epoch stays, and the per-partition rule is what
     *  sees a split). A consume-transform-produce run's output transactions hold records of
     *  several input transactions by design: there only one commit unit per key is checked. */
    static Atomicity atomicity(List<LogEntry> log, String prefix, int m, boolean ctp) {
        Atomicity a = new Atomicity();
        Map<String, List<LogEntry>> open = new HashMap<>();   // "partition/pid" -> records since its last marker
        // txn index -> its commit units: "partition/pid/epoch/markerOffset"
        Map<Integer, Set<String>> unitsOf = new TreeMap<>();
        Map<String, Set<Integer>> txnsIn = new HashMap<>();
        for (LogEntry e : log) {
            String pp = e.partition() + "/" + e.pid();
            if (e.control() == null) {
                if (e.key() == null || !e.key().startsWith(prefix)) continue;
                a.producers.computeIfAbsent(e.pid(), x -> new TreeSet<>()).add((int) e.epoch());
                open.computeIfAbsent(pp, x -> new ArrayList<>()).add(e);
                continue;
            }
            List<LogEntry> recs = open.remove(pp);
            if (recs == null || recs.isEmpty()) continue;
            if (!e.control().equals("COMMIT")) { a.abortUnits++; continue; }
            a.commitUnits++;
            String unit = e.partition() + "/" + e.pid() + "/" + e.epoch() + "/" + e.offset();
            Map<String, Integer> inUnit = new HashMap<>();
            for (LogEntry r : recs) {
                if (inUnit.merge(r.key(), 1, Integer::sum) > 1) a.duplicateWithinCommit++;
                if (!a.committedAt.containsKey(r.key())) {
                    a.committedAt.put(r.key(), e.offset());
                    a.partitionOf.put(r.key(), r.partition());
                }
                int[] ij = parseKey(r.key().substring(prefix.length()), m);
                if (ij == null) continue;
                unitsOf.computeIfAbsent(ij[0], x -> new TreeSet<>()).add(unit);
                txnsIn.computeIfAbsent(unit, x -> new TreeSet<>()).add(ij[0]);
            }
        }
        if (ctp) return a;
        for (Map.Entry<Integer, Set<String>> t : unitsOf.entrySet()) {
            int i = t.getKey();
            Map<String, Integer> perPartition = new HashMap<>();
            Set<String> pidEpochs = new TreeSet<>();
            Set<Integer> others = new TreeSet<>();
            for (String u : t.getValue()) {
                String[] f = u.split("/");
                perPartition.merge(f[0], 1, Integer::sum);
                pidEpochs.add(f[1] + "/" + f[2]);
                for (int other : txnsIn.get(u)) if (other != i) others.add(other);
            }
            List<String> why = new ArrayList<>();
            List<String> split = new ArrayList<>();
            perPartition.forEach((p, c) -> { if (c > 1) split.add("partition " + p + ": " + c + " commits"); });
            if (!split.isEmpty()) why.add(String.join(", ", split));
            if (pidEpochs.size() > 1) why.add("producer id/epoch " + pidEpochs);
            if (!others.isEmpty()) why.add("committed together with transaction(s) " + others);
            if (!why.isEmpty()) a.violations.add("transaction " + i + ": " + String.join(", ", why));
        }
        return a;
    }

    // ------------------------------------------------------------------ consume-transform-produce offsets
    static final class Offsets {
        int problems;
        final List<String> examples = new ArrayList<>();

        void add(String s) {
            problems++;
            if (examples.size() < 10) examples.add(s);
        }
    }

    /** For every input partition p with committed group offset c_p (none: 0): each input record
     *  below c_p must have its output (key "RUN_ID:<input key>" for the account's run id minus its
     *  own input prefix, i.e. the output key is the account's prefix plus the input key's i:j), and
     *  none at or above c_p may (its output committed, its offset not: a restart would write it
     *  again). That is: the offsets committed with each transaction were the last input of it, +1. */
    static Offsets offsets(List<Rec> input, Map<Integer, Long> group, Set<String> outputs, String accountRunId) {
        Offsets o = new Offsets();
        // The account's run id is "RUNID:PREFIX" and an output key is "RUNID:PREFIX:i:j" for the
        // input key "PREFIX:i:j": output key = RUNID + ":" + input key.
        int colon = accountRunId.indexOf(':');
        String outPrefix = colon < 0 ? accountRunId + ":" : accountRunId.substring(0, colon + 1);
        for (Rec r : input) {
            long c = group.getOrDefault(r.partition(), 0L);
            boolean out = outputs.contains(outPrefix + r.key());
            if (r.offset() < c && !out)
                o.add("input " + r.key() + " (partition " + r.partition() + " offset " + r.offset() + ") is below the committed offset " + c + " but has no output");
            else if (r.offset() >= c && out)
                o.add("input " + r.key() + " (partition " + r.partition() + " offset " + r.offset() + ") has an output but the committed offset is " + c);
        }
        return o;
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

    static List<Rec> parseRecs(JsonNode recs) {
        List<Rec> records = new ArrayList<>();
        long n = 0;
        for (JsonNode r : recs) {
            if (r.isTextual()) records.add(new Rec(0, n, r.asText()));
            else records.add(new Rec(r.path("partition").asInt(0), r.path("offset").asLong(n), r.path("key").asText("")));
            n++;
        }
        return records;
    }

    static Map<Integer, Long> parseOffsets(JsonNode o) {
        Map<Integer, Long> m = new TreeMap<>();
        for (Map.Entry<String, JsonNode> e : o.properties()) m.put(Integer.valueOf(e.getKey()), e.getValue().asLong());
        return m;
    }

    static Read parseRead(String text) {
        JsonNode root;
        try {
            root = JSON.readTree(text);
        } catch (IOException e) {
            throw new IllegalArgumentException("READ.json is not JSON: " + e.getMessage());
        }
        List<Rec> records = parseRecs(root.isArray() ? root : root.path("records"));
        List<Integer> stuck = new ArrayList<>();
        for (JsonNode p : root.path("stuck_partitions")) stuck.add(p.asInt());
        List<LogEntry> log = null;
        if (root.path("log").isArray()) {
            log = new ArrayList<>();
            for (JsonNode e : root.path("log"))
                log.add(new LogEntry(e.path("partition").asInt(0), e.path("offset").asLong(), e.hasNonNull("key") ? e.path("key").asText() : null,
                                     e.path("pid").asLong(-1), (short) e.path("epoch").asInt(-1),
                                     e.hasNonNull("control") ? e.path("control").asText() : null));
        }
        return new Read(records, stuck, !root.path("topic_found").isBoolean() || root.path("topic_found").asBoolean(),
                        parseOffsets(root.path("lso")), log, root.path("input").isArray() ? parseRecs(root.path("input")) : null,
                        root.path("group_offsets").isObject() ? parseOffsets(root.path("group_offsets")) : null);
    }

    static void saveRead(Read read, String file) {
        ObjectNode root = JSON.createObjectNode();
        ArrayNode a = root.putArray("records");
        for (Rec r : read.records()) a.addObject().put("partition", r.partition()).put("offset", r.offset()).put("key", r.key());
        ArrayNode s = root.putArray("stuck_partitions");
        read.stuckPartitions().forEach(s::add);
        root.put("topic_found", read.topicFound());
        ObjectNode lso = root.putObject("lso");
        read.lso().forEach((p, o) -> lso.put(String.valueOf(p), o));
        if (read.log() != null) {
            ArrayNode l = root.putArray("log");
            for (LogEntry e : read.log()) {
                ObjectNode n = l.addObject().put("partition", e.partition()).put("offset", e.offset()).put("pid", e.pid()).put("epoch", e.epoch());
                if (e.control() != null) n.put("control", e.control());
                else n.put("key", e.key());
            }
        }
        if (read.input() != null) {
            ArrayNode in = root.putArray("input");
            for (Rec r : read.input()) in.addObject().put("partition", r.partition()).put("offset", r.offset()).put("key", r.key());
        }
        if (read.groupOffsets() != null) {
            ObjectNode g = root.putObject("group_offsets");
            read.groupOffsets().forEach((p, o) -> g.put(String.valueOf(p), o));
        }
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
     *  stable offset). First waits, up to waitS, until each partition's LSO reaches its high
     *  watermark (no transaction open); a partition where it never does is reported stuck and read
     *  to its LSO. The read itself then has another min(waitS, 45 s). Then the raw log of each
     *  partition to its high watermark (producer ids, epochs, markers), and for a
     *  consume-transform-produce cell the input topic and the group's committed offsets. */
    static Read readTopic(String bootstrap, String topic, double waitS, String inputTopic, String group) {
        long deadline = System.nanoTime() + (long) (waitS * 1e9);
        // A topic that does not exist (the driver never got to create it) reads as empty.
        long topicDeadline = System.nanoTime() + (long) (Math.min(waitS, 15) * 1e9);
        try (KafkaConsumer<byte[], byte[]> rc = consumer(bootstrap, "read_committed");
             KafkaConsumer<byte[], byte[]> ru = consumer(bootstrap, "read_uncommitted")) {
            List<TopicPartition> tps = new ArrayList<>();
            List<PartitionInfo> infos;
            while (true) {
                infos = rc.partitionsFor(topic, Duration.ofSeconds(10));
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
            Map<Integer, Long> lsoByPartition = new TreeMap<>();
            for (TopicPartition tp : tps) {
                if (lso.get(tp) < hw.get(tp)) stuck.add(tp.partition());
                lsoByPartition.put(tp.partition(), lso.get(tp));
            }
            List<Rec> records = readAll(rc, tps, lso, Math.min(waitS, 45));
            List<LogEntry> log = new ArrayList<>();
            for (PartitionInfo info : infos) {
                TopicPartition tp = new TopicPartition(topic, info.partition());
                log.addAll(rawLog(info.leader(), tp, hw.get(tp)));
            }
            List<Rec> input = null;
            Map<Integer, Long> groupOffsets = null;
            if (inputTopic != null && group != null) {
                List<TopicPartition> in = new ArrayList<>();
                for (PartitionInfo i : rc.partitionsFor(inputTopic, Duration.ofSeconds(10))) in.add(new TopicPartition(inputTopic, i.partition()));
                input = readAll(rc, in, rc.endOffsets(in, Duration.ofSeconds(30)), Math.min(waitS, 45));
                groupOffsets = groupOffsets(bootstrap, group, inputTopic);
            }
            return new Read(records, stuck, true, lsoByPartition, log, input, groupOffsets);
        }
    }

    static List<Rec> readAll(KafkaConsumer<byte[], byte[]> c, List<TopicPartition> tps, Map<TopicPartition, Long> end, double limitS) {
        c.unsubscribe();
        c.assign(tps);
        c.seekToBeginning(tps);
        List<Rec> records = new ArrayList<>();
        long readDeadline = System.nanoTime() + (long) (limitS * 1e9);
        Set<TopicPartition> left = new HashSet<>(tps);
        while (true) {
            left.removeIf(tp -> c.position(tp, Duration.ofSeconds(30)) >= end.get(tp));
            if (left.isEmpty()) break;
            if (System.nanoTime() > readDeadline)
                throw new IllegalStateException("read did not reach the end offsets within " + limitS + " s: " + left);
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                String key = r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
                records.add(new Rec(r.partition(), r.offset(), key));
            }
        }
        return records;
    }

    /** The group's committed offsets for the input topic's partitions (Admin listConsumerGroupOffsets). */
    static Map<Integer, Long> groupOffsets(String bootstrap, String group, String inputTopic) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "conformance-verifier-admin");
        Map<Integer, Long> out = new TreeMap<>();
        try (Admin admin = Admin.create(p)) {
            Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet())
                if (e.getKey().topic().equals(inputTopic) && e.getValue() != null) out.put(e.getKey().partition(), e.getValue().offset());
        } catch (Exception e) {
            throw new IllegalStateException("listConsumerGroupOffsets(" + group + "): " + e, e);
        }
        return out;
    }

    /** One partition's log from offset 0 to `end` as its leader stores it: Fetch (v12,
     *  read_uncommitted) straight to the leader, so aborted records and the control batches (the
     *  transaction markers) come too, each batch with its producer id and epoch — what a
     *  KafkaConsumer does not show. */
    static List<LogEntry> rawLog(Node leader, TopicPartition tp, long end) {
        List<LogEntry> out = new ArrayList<>();
        if (end <= 0) return out;
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(leader.host(), leader.port()), 10_000);
            s.setSoTimeout(30_000);
            DataOutputStream w = new DataOutputStream(s.getOutputStream());
            DataInputStream r = new DataInputStream(s.getInputStream());
            long offset = 0;
            int correlation = 0;
            while (offset < end) {
                Map<TopicPartition, FetchRequest.PartitionData> want = new LinkedHashMap<>();
                want.put(tp, new FetchRequest.PartitionData(Uuid.ZERO_UUID, offset, -1L, 4 << 20, Optional.empty()));
                FetchRequest req = FetchRequest.Builder.forConsumer(FETCH_VERSION, 100, 1, want)
                        .isolationLevel(IsolationLevel.READ_UNCOMMITTED).build(FETCH_VERSION);
                RequestHeader h = new RequestHeader(ApiKeys.FETCH, FETCH_VERSION, "conformance-verifier-raw", ++correlation);
                ByteBuffer b = req.serializeWithHeader(h);
                byte[] bytes = new byte[b.remaining()];
                b.get(bytes);
                w.writeInt(bytes.length);
                w.write(bytes);
                w.flush();
                byte[] resp = new byte[r.readInt()];
                r.readFully(resp);
                FetchResponse fr = (FetchResponse) AbstractResponse.parseResponse(ByteBuffer.wrap(resp), h);
                FetchResponseData.PartitionData pd = fr.responseData(Map.of(), FETCH_VERSION).get(tp);
                if (pd == null) throw new IllegalStateException("no answer for " + tp);
                if (pd.errorCode() != 0) throw new IllegalStateException("Fetch " + tp + " at " + offset + ": " + Errors.forCode(pd.errorCode()));
                Records recs = FetchResponse.recordsOrFail(pd);
                long before = offset;
                for (RecordBatch batch : recs.batches()) {
                    if (batch.lastOffset() < offset) continue;
                    for (Record rec : batch) {
                        if (rec.offset() < offset || rec.offset() >= end) continue;
                        if (batch.isControlBatch()) {
                            ControlRecordType t = rec.hasKey() ? ControlRecordType.parse(rec.key()) : ControlRecordType.UNKNOWN;
                            out.add(new LogEntry(tp.partition(), rec.offset(), null, batch.producerId(), batch.producerEpoch(), t.name()));
                        } else {
                            String key = rec.hasKey() ? StandardCharsets.UTF_8.decode(rec.key()).toString() : "";
                            out.add(new LogEntry(tp.partition(), rec.offset(), key, batch.producerId(), batch.producerEpoch(), null));
                        }
                    }
                    offset = batch.lastOffset() + 1;
                }
                if (offset == before) throw new IllegalStateException("Fetch " + tp + " at " + offset + " returned nothing before " + end);
            }
        } catch (IOException e) {
            throw new IllegalStateException("raw read of " + tp + " from " + leader + ": " + e, e);
        }
        return out;
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
