// Kafka client metrics the Java test clients report (shared: clients.py compiles it with every
// program in this directory).
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;

public final class ClientMetrics {
    private ClientMetrics() {}

    /** The client's selector counters connection-creation-total and connection-close-total
     *  (connections opened / closed over its whole life), summed over the metric group `group`
     *  ("producer-metrics", "consumer-metrics"), by metric name. */
    public static Map<String, Double> connectionCounters(Map<MetricName, ? extends Metric> metrics, String group) {
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
