// Watches a transactional.id's state at its coordinator (Java Admin describeTransactions) until
// its transaction is no longer open, for kproxy's hanging-transaction test: when did the
// coordinator itself abort what a killed producer left open. Run (compiled with Args.java and
// Json.java; see clients.py):
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' TxnStateWatcher \
//        --bootstrap 127.0.0.1:9092 --transactional-id T [--timeout-ms 60000] [--interval-ms 100]
//
// Asks every --interval-ms until the state is none of Ongoing, PrepareAbort, PrepareCommit,
// PrepareEpochFence (e.g. CompleteAbort), or --timeout-ms passes. Prints one line per state change
// ("state <State> at_ms=<wall clock ms>") and then one JSON line: ok (a final state was reached),
// state, producer_id, producer_epoch (the coordinator's, after its abort), first_state,
// changed_at_ms (wall clock ms when the final state was first seen), polls, error.
// Exit code 0 only when ok.
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionState;

public class TxnStateWatcher {
    public static void main(String[] argv) throws InterruptedException {
        Map<String, List<String>> a = Args.parse(argv, Set.of("bootstrap", "transactional-id", "timeout-ms", "interval-ms"));
        String txnId = Args.req(a, "transactional-id");
        long timeoutMs = Long.parseLong(Args.opt(a, "timeout-ms", "60000"));
        long intervalMs = Long.parseLong(Args.opt(a, "interval-ms", "100"));
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, Args.req(a, "bootstrap"));
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        long deadline = System.currentTimeMillis() + timeoutMs;
        TransactionDescription last = null;
        String firstState = null, error = null;
        long changedAt = 0;
        int polls = 0;
        boolean done = false;
        try (Admin admin = Admin.create(p)) {
            while (!done && System.currentTimeMillis() < deadline) {
                polls++;
                TransactionDescription d;
                try {
                    d = admin.describeTransactions(List.of(txnId)).description(txnId).get(15, TimeUnit.SECONDS);
                } catch (Exception e) {
                    error = e.getClass().getSimpleName() + ": " + e.getMessage();
                    Thread.sleep(intervalMs);
                    continue;
                }
                long now = System.currentTimeMillis();
                if (firstState == null) firstState = d.state().toString();
                if (last == null || last.state() != d.state()) {
                    System.out.println("state " + d.state() + " at_ms=" + now);
                    System.out.flush();
                    changedAt = now;
                }
                last = d;
                TransactionState s = d.state();
                done = s != TransactionState.ONGOING && s != TransactionState.PREPARE_ABORT && s != TransactionState.PREPARE_COMMIT
                       && s != TransactionState.PREPARE_EPOCH_FENCE;
                if (!done) Thread.sleep(intervalMs);
            }
        }
        StringBuilder js = new StringBuilder("{");
        js.append("\"ok\":").append(done);
        js.append(",\"state\":").append(Json.q(last == null ? null : last.state().toString()));
        js.append(",\"producer_id\":").append(last == null ? -1 : last.producerId());
        js.append(",\"producer_epoch\":").append(last == null ? -1 : last.producerEpoch());
        js.append(",\"first_state\":").append(Json.q(firstState));
        js.append(",\"changed_at_ms\":").append(changedAt);
        js.append(",\"polls\":").append(polls);
        js.append(",\"error\":").append(Json.q(error));
        js.append("}");
        System.out.println(js);
        System.out.flush();
        System.exit(done ? 0 : 1);
    }
}
