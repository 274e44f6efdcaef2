// JSON text for the Java test clients' summary lines (shared: clients.py compiles it with every
// program in this directory). Written by hand: the clients use only the kafka-clients jars.
import java.util.List;
import java.util.Map;

public final class Json {
    private Json() {}

    /** A JSON string literal (RFC 8259 section 7 escapes); null gives the literal null. */
    public static String q(String s) {
        if (s == null) return "null";
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

    /** ["a","b"] */
    public static String strList(List<String> l) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < l.size(); i++) { if (i > 0) b.append(','); b.append(q(l.get(i))); }
        return b.append(']').toString();
    }

    /** {"<partition>":n,...} */
    public static String partitionMap(Map<Integer, ? extends Number> m) {
        StringBuilder b = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<Integer, ? extends Number> e : m.entrySet()) {
            if (!first) b.append(',');
            first = false;
            b.append('"').append(e.getKey()).append("\":").append(e.getValue());
        }
        return b.append('}').toString();
    }

    /** {"<name>":n,...} (e.g. error class -> count) */
    public static String countMap(Map<String, Integer> m) {
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
