// Java Admin describeTransactions through kproxy, for the chaos tests (docs/faults.md scenarios 13, 16).
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' ChaosDescribeTxn \
//        --bootstrap 127.0.0.1:9092 --transactional-id T [--timeout-ms 20000]
//
// Prints one JSON line: ok, state (when found), error_class (the cause's class when it failed),
// error. Exit code 0 only when ok.
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionDescription;

public class ChaosDescribeTxn {
    public static void main(String[] argv) throws Exception {
        Map<String, List<String>> a = Args.parse(argv, Set.of("bootstrap", "transactional-id", "timeout-ms"));
        String bootstrap = Args.req(a, "bootstrap");
        String txnId = Args.req(a, "transactional-id");
        long timeoutMs = Long.parseLong(Args.opt(a, "timeout-ms", "20000"));
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        String state = null, errorClass = null, error = null;
        try (Admin admin = Admin.create(p)) {
            TransactionDescription d = admin.describeTransactions(List.of(txnId)).description(txnId).get(timeoutMs + 5000, TimeUnit.MILLISECONDS);
            state = d.state().toString();
        } catch (ExecutionException e) {
            errorClass = e.getCause().getClass().getName();
            error = String.valueOf(e.getCause().getMessage());
        }
        System.out.println("{\"ok\":" + (errorClass == null) + ",\"state\":" + Json.q(state) + ",\"error_class\":" + Json.q(errorClass) + ",\"error\":" + Json.q(error) + "}");
        System.exit(errorClass == null ? 0 : 1);
    }
}
