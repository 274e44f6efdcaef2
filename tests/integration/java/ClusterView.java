// Java Admin describeCluster, describeTopics and createTopics through kproxy: what an admin client
// is told of the cluster (the addresses of its brokers) and that it can act on it (issue #33).
//
//   java -cp 'build/java-classes:.cache/kafka-4.4.0/libs/*' ClusterView \
//        --bootstrap host:port --topic T [--create-topic NEW --partitions 3] \
//        [--security-protocol SSL] [--property k=v ...] [--timeout-ms 30000]
//
// Prints one JSON line: ok, nodes ["host:port", ...] (describeCluster), controller "host:port",
// leaders ["host:port", ...] (the leader of each partition of --topic), created (true when
// --create-topic was made), error_class and error on failure. Exit code 0 only when ok.
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;

public class ClusterView {
    private static String address(Node n) {
        return n == null ? null : n.host() + ":" + n.port();
    }

    private static String list(List<String> items) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < items.size(); i++) b.append(i == 0 ? "" : ",").append(Json.q(items.get(i)));
        return b.append("]").toString();
    }

    public static void main(String[] argv) throws Exception {
        Map<String, List<String>> a = Args.parse(argv, Set.of("bootstrap", "topic", "create-topic", "partitions", "timeout-ms",
                                                              "security-protocol", "property"));
        String bootstrap = Args.req(a, "bootstrap");
        String topic = Args.req(a, "topic");
        String create = Args.opt(a, "create-topic", null);
        int partitions = Integer.parseInt(Args.opt(a, "partitions", "3"));
        long timeoutMs = Long.parseLong(Args.opt(a, "timeout-ms", "30000"));
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        Args.security(a, p);
        Args.properties(a, p);
        List<String> nodes = new ArrayList<>(), leaders = new ArrayList<>();
        String controller = null, errorClass = null, error = null;
        boolean created = false;
        try (Admin admin = Admin.create(p)) {
            DescribeClusterResult c = admin.describeCluster();
            for (Node n : c.nodes().get(timeoutMs, TimeUnit.MILLISECONDS)) nodes.add(address(n));
            controller = address(c.controller().get(timeoutMs, TimeUnit.MILLISECONDS));
            TopicDescription d = admin.describeTopics(List.of(topic)).topicNameValues().get(topic).get(timeoutMs, TimeUnit.MILLISECONDS);
            for (TopicPartitionInfo pi : d.partitions()) leaders.add(address(pi.leader()));
            if (create != null) {
                admin.createTopics(List.of(new NewTopic(create, partitions, (short) 3))).all().get(timeoutMs, TimeUnit.MILLISECONDS);
                created = true;
            }
        } catch (ExecutionException e) {
            errorClass = e.getCause().getClass().getName();
            error = String.valueOf(e.getCause().getMessage());
        }
        System.out.println("{\"ok\":" + (errorClass == null) + ",\"nodes\":" + list(nodes) + ",\"controller\":" + Json.q(controller) +
                           ",\"leaders\":" + list(leaders) + ",\"created\":" + created + ",\"error_class\":" + Json.q(errorClass) +
                           ",\"error\":" + Json.q(error) + "}");
        System.exit(errorClass == null ? 0 : 1);
    }
}
