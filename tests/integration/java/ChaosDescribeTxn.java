// Java Admin describeTransactions through kproxy, for the chaos tests (FAULTS.md scenarios 13, 16).
//
//   java -cp '.cache/kafka-4.4.0/libs/*' tests/integration/java/ChaosDescribeTxn.java \
//        --bootstrap 127.0.0.1:9092 --transactional-id T [--timeout-ms 20000]
//
// Prints one JSON line: ok, state (when found), error_class (the cause's class when it failed),
// error. Exit code 0 only when ok.
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionDescription;

public class ChaosDescribeTxn {
    public static void main(String[] argv) throws Exception {
        String bootstrap = null, txnId = null;
        long timeoutMs = 20000;
        for (int i = 0; i + 1 < argv.length; i += 2) {
            switch (argv[i]) {
                case "--bootstrap": bootstrap = argv[i + 1]; break;
                case "--transactional-id": txnId = argv[i + 1]; break;
                case "--timeout-ms": timeoutMs = Long.parseLong(argv[i + 1]); break;
                default: throw new IllegalArgumentException("unknown option " + argv[i]);
            }
        }
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
        System.out.println("{\"ok\":" + (errorClass == null) + ",\"state\":" + q(state) + ",\"error_class\":" + q(errorClass) + ",\"error\":" + q(error) + "}");
        System.exit(errorClass == null ? 0 : 1);
    }

    static String q(String s) {
        if (s == null) return "null";
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }
}
