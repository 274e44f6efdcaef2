// Command-line options of the Java test clients (shared: clients.py compiles it with every
// program in this directory, see its module docstring).
//
// Options are "--name value" or "--name=value"; a repeated option keeps every value (opt() and
// req() return the last one). A usage error prints {"ok":false,"error":"usage: ..."} as the JSON
// summary line and exits with code 2.
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

public final class Args {
    private Args() {}

    public static Map<String, List<String>> parse(String[] argv) {
        Map<String, List<String>> m = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            String k = argv[i];
            if (!k.startsWith("--")) die("unexpected argument: " + k);
            k = k.substring(2);
            String v;
            int eq = k.indexOf('=');
            if (eq >= 0) { v = k.substring(eq + 1); k = k.substring(0, eq); }
            else if (i + 1 < argv.length) v = argv[++i];
            else { die("missing value for --" + k); return m; }
            m.computeIfAbsent(k, x -> new ArrayList<>()).add(v);
        }
        return m;
    }

    /** parse(), refusing any option not in `known`. */
    public static Map<String, List<String>> parse(String[] argv, Set<String> known) {
        Map<String, List<String>> m = parse(argv);
        for (String k : m.keySet()) {
            if (!known.contains(k)) die("unknown option --" + k);
        }
        return m;
    }

    public static String req(Map<String, List<String>> a, String k) {
        String v = opt(a, k, null);
        if (v == null) die("missing --" + k);
        return v;
    }

    public static String opt(Map<String, List<String>> a, String k, String def) {
        List<String> l = a.get(k);
        return l == null ? def : l.get(l.size() - 1);
    }

    /** --security-protocol, and --sasl-mechanism (PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512) with
     *  --sasl-user / --sasl-password (the protocol then defaults to SASL_PLAINTEXT). */
    public static void security(Map<String, List<String>> a, Properties p) {
        String mech = opt(a, "sasl-mechanism", null);
        String proto = opt(a, "security-protocol", mech != null ? "SASL_PLAINTEXT" : null);
        if (proto != null) p.put("security.protocol", proto);
        if (mech != null) {
            String user = req(a, "sasl-user"), pass = req(a, "sasl-password");
            String module = mech.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                                                 : "org.apache.kafka.common.security.scram.ScramLoginModule";
            p.put("sasl.mechanism", mech);
            p.put("sasl.jaas.config", module + " required username=" + Json.q(user) + " password=" + Json.q(pass) + ";");
        }
    }

    /** Every --property key=value into p (any client config). */
    public static void properties(Map<String, List<String>> a, Properties p) {
        properties(a, "property", p);
    }

    /** Every --<option> key=value into p. */
    public static void properties(Map<String, List<String>> a, String option, Properties p) {
        for (String kv : a.getOrDefault(option, List.of())) {
            int eq = kv.indexOf('=');
            if (eq <= 0) die("--" + option + " wants key=value, got " + kv);
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
    }

    public static void die(String msg) {
        System.out.println("{\"ok\":false,\"error\":" + Json.q("usage: " + msg) + "}");
        System.exit(2);
    }
}
