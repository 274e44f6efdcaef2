// toxiproxy-java (eu.rekawek.toxiproxy:toxiproxy-java, pinned in pom.xml beside this file) driving
// a Toxiproxy API: kproxy's in tests/integration/test_toxiproxy_clients.py (docs/toxiproxy.md).
//
//   java -cp ... ToxiproxyJavaDriver tcp   API_HOST API_PORT ECHO_ADDR    a proxy to a TCP echo server, its toxics measured
//   java -cp ... ToxiproxyJavaDriver kafka API_HOST API_PORT BROKER_ADDR  a proxy to a Kafka broker, a kafka_error toxic
//   java -cp ... ToxiproxyJavaDriver kafka-create|kafka-toxics|kafka-clear API_HOST API_PORT BROKER_ADDR
//   java -cp ... ToxiproxyJavaDriver kafka-bandwidth|kafka-timeout|kafka-reset API_HOST API_PORT BROKER_ADDR
//                                    one step of a proxy a Java producer and consumer run through (kafkaStep)
//
// toxiproxy-java has a method per Toxiproxy toxic type and none that takes a free-form type, so
// the kafka_error toxic is added with a plain HTTP POST to the same API; what the client then
// makes of a proxy that lists it (getAll()) is reported. Prints one JSON object as its last
// stdout line; the test asserts on it. Every socket operation has a timeout.
import eu.rekawek.toxiproxy.Proxy;
import eu.rekawek.toxiproxy.ToxiproxyClient;
import eu.rekawek.toxiproxy.model.Toxic;
import eu.rekawek.toxiproxy.model.ToxicDirection;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public class ToxiproxyJavaDriver {
  private static final Map<String, Object> out = new LinkedHashMap<>();
  /** The rate of the bandwidth toxic kafka-bandwidth adds (KB/s). */
  private static final long KAFKA_RATE_KBS = 2;

  private static Socket connect(String addr) throws IOException {
    int colon = addr.lastIndexOf(':');
    Socket s = new Socket();
    s.connect(new InetSocketAddress(addr.substring(0, colon), Integer.parseInt(addr.substring(colon + 1))), 5000);
    s.setSoTimeout(30000);
    return s;
  }

  private static String errName(Exception e) {
    if (e instanceof ConnectException) return "ECONNREFUSED";
    if (e instanceof SocketTimeoutException) return "timeout";
    if (e instanceof SocketException && String.valueOf(e.getMessage()).toLowerCase().contains("reset")) return "ECONNRESET";
    return e.getClass().getSimpleName() + ": " + e.getMessage();
  }

  /** Sends payload through the proxy and reads it back: {"seconds", "error"}. */
  private static Map<String, Object> roundTrip(String addr, byte[] payload) {
    Map<String, Object> r = new LinkedHashMap<>();
    try (Socket s = connect(addr)) {
      long t0 = System.nanoTime();
      OutputStream o = s.getOutputStream();
      o.write(payload);
      o.flush();
      InputStream in = s.getInputStream();
      byte[] got = new byte[payload.length];
      int n = 0;
      while (n < got.length) {
        int k = in.read(got, n, got.length - n);
        if (k < 0) break;
        n += k;
      }
      r.put("seconds", (System.nanoTime() - t0) / 1e9);
      r.put("error", n == got.length && Arrays.equals(got, payload) ? "none" : "short or changed: " + n + " bytes");
    } catch (IOException e) {
      r.put("error", errName(e));
    }
    return r;
  }

  /** Sends a little and waits (at most 10 s) for the connection to end: {"end", "seconds", "bytes"}. */
  private static Map<String, Object> waitEnd(String addr) {
    Map<String, Object> r = new LinkedHashMap<>();
    long t0 = System.nanoTime();
    int total = 0;
    try (Socket s = connect(addr)) {
      s.setSoTimeout(10000);
      s.getOutputStream().write("ping".getBytes(StandardCharsets.US_ASCII));
      InputStream in = s.getInputStream();
      byte[] buf = new byte[64];
      int k;
      while ((k = in.read(buf)) >= 0) total += k;
      r.put("end", "EOF");
    } catch (IOException e) {
      r.put("end", errName(e));
    }
    r.put("seconds", (System.nanoTime() - t0) / 1e9);
    r.put("bytes", total);
    return r;
  }

  private static List<String> names(Proxy proxy) throws IOException {
    List<String> names = new ArrayList<>();
    for (Toxic t : proxy.toxics().getAll()) names.add(t.getName());
    Collections.sort(names);
    return names;
  }

  /** A plain HTTP request to the API: the status. */
  private static int http(String base, String method, String path, String body) throws IOException {
    HttpURLConnection c = (HttpURLConnection) new URL(base + path).openConnection();
    c.setConnectTimeout(5000);
    c.setReadTimeout(10000);
    c.setRequestMethod(method);
    if (body != null) {
      c.setDoOutput(true);
      c.setRequestProperty("Content-Type", "application/json");
      try (OutputStream o = c.getOutputStream()) {
        o.write(body.getBytes(StandardCharsets.UTF_8));
      }
    }
    int status = c.getResponseCode();
    c.disconnect();
    return status;
  }

  private static void tcp(ToxiproxyClient client, String base, String upstream) throws IOException {
    out.put("version", client.version());
    Proxy proxy = client.createProxy("java-echo", "127.0.0.1:0", upstream);
    String addr = proxy.getListen();
    out.put("created", Map.of("name", proxy.getName(), "listen", addr, "upstream", proxy.getUpstream(), "enabled", proxy.isEnabled()));
    out.put("plain", roundTrip(addr, "hello".getBytes(StandardCharsets.US_ASCII)));

    Toxic latency = proxy.toxics().latency("slow", ToxicDirection.DOWNSTREAM, 300);
    out.put("latency_toxics", names(proxy));
    out.put("latency", roundTrip(addr, "slow".getBytes(StandardCharsets.US_ASCII)));
    latency.remove();
    Map<String, Object> fast = roundTrip(addr, "fast".getBytes(StandardCharsets.US_ASCII));
    fast.put("toxics", names(proxy));
    out.put("after_latency", fast);

    Toxic bandwidth = proxy.toxics().bandwidth("cap", ToxicDirection.DOWNSTREAM, 100);
    byte[] big = new byte[150000];
    for (int i = 0; i < big.length; i++) big[i] = (byte) (i * 7);
    Map<String, Object> capped = roundTrip(addr, big);
    capped.put("bytes", big.length);
    out.put("bandwidth", capped);
    bandwidth.remove();

    Toxic timeout = proxy.toxics().timeout("hold", ToxicDirection.UPSTREAM, 200);
    out.put("timeout", waitEnd(addr));
    timeout.remove();

    Toxic reset = proxy.toxics().resetPeer("rst", ToxicDirection.DOWNSTREAM, 100);
    out.put("reset", waitEnd(addr));
    reset.remove();

    // kafka_error by its type string, through the same API (see the header).
    int added = http(base, "POST", "/proxies/java-echo/toxics",
        "{\"name\":\"produce-errors\",\"type\":\"kafka_error\",\"stream\":\"downstream\",\"toxicity\":1,"
            + "\"attributes\":{\"api\":\"Produce\",\"error\":\"NOT_LEADER_OR_FOLLOWER\"}}");
    out.put("kafka_error_status", added);
    try {
      out.put("kafka_error_listed", names(proxy));
    } catch (RuntimeException | IOException e) {
      out.put("kafka_error_listed", "getAll failed: " + e.getClass().getSimpleName());
    }
    out.put("kafka_error_removed", http(base, "DELETE", "/proxies/java-echo/toxics/produce-errors", null));
    Map<String, Object> clean = roundTrip(addr, "clean".getBytes(StandardCharsets.US_ASCII));
    clean.put("toxics", names(proxy));
    out.put("clean", clean);

    proxy.disable();
    out.put("while_disabled", roundTrip(addr, "x".getBytes(StandardCharsets.US_ASCII)).get("error"));
    proxy.enable();
    out.put("reenabled", roundTrip(addr, "again".getBytes(StandardCharsets.US_ASCII)).get("error"));
    out.put("proxies", client.getProxies().size());
    proxy.delete();
    out.put("after_delete_lookup", client.getProxyOrNull("java-echo") == null ? "null" : "found");
    out.put("after_delete", roundTrip(addr, "x".getBytes(StandardCharsets.US_ASCII)).get("error"));
  }

  private static void kafka(ToxiproxyClient client, String base, String broker) throws IOException {
    Proxy proxy = client.createProxy("java-kafka", "127.0.0.1:0", broker);
    out.put("listen", proxy.getListen());
    proxy.toxics().latency("kafka-latency", ToxicDirection.DOWNSTREAM, 100);
    out.put("kafka_error_status", http(base, "POST", "/proxies/java-kafka/toxics",
        "{\"name\":\"fetch-errors\",\"type\":\"kafka_error\",\"attributes\":{\"api\":\"Fetch\",\"error\":\"NOT_LEADER_OR_FOLLOWER\"}}"));
    try {
      out.put("toxics", names(proxy));
    } catch (RuntimeException | IOException e) {
      out.put("toxics", "getAll failed: " + e.getClass().getSimpleName());
    }
  }

  // The steps of a run with a Java producer and consumer between them (the test runs those):
  // kafka-create makes the proxy; kafka-toxics adds a 300 ms latency toxic through the client and a
  // kafka_error toxic (InitProducerId answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED) by HTTP POST;
  // kafka-clear removes the kafka_error toxic by HTTP DELETE (the client's getAll() cannot list
  // it, docs/toxiproxy.md) and then the latency toxic through the client.
  private static void kafkaStep(ToxiproxyClient client, String base, String step, String broker) throws IOException {
    if (step.equals("kafka-create")) {
      out.put("listen", client.createProxy("java-txn", "127.0.0.1:0", broker).getListen());
      return;
    }
    Proxy proxy = client.getProxy("java-txn");
    // Toxiproxy's own types through the client's typed calls, downstream; the test measures them.
    if (step.equals("kafka-bandwidth")) {
      out.put("added", proxy.toxics().bandwidth("txn-bandwidth", ToxicDirection.DOWNSTREAM, KAFKA_RATE_KBS).getName());
      return;
    }
    if (step.equals("kafka-timeout")) {
      out.put("added", proxy.toxics().timeout("txn-timeout", ToxicDirection.DOWNSTREAM, 0).getName());
      return;
    }
    if (step.equals("kafka-reset")) {
      out.put("added", proxy.toxics().resetPeer("txn-reset", ToxicDirection.DOWNSTREAM, 0).getName());
      return;
    }
    if (step.equals("kafka-toxics")) {
      proxy.toxics().latency("txn-latency", ToxicDirection.DOWNSTREAM, 300);
      out.put("kafka_error_status", http(base, "POST", "/proxies/java-txn/toxics",
          "{\"name\":\"deny-init\",\"type\":\"kafka_error\",\"stream\":\"downstream\",\"attributes\":"
              + "{\"api\":\"InitProducerId\",\"error\":\"TRANSACTIONAL_ID_AUTHORIZATION_FAILED\"}}"));
    } else {
      out.put("kafka_error_removed", http(base, "DELETE", "/proxies/java-txn/toxics/deny-init", null));
      for (Toxic t : proxy.toxics().getAll()) t.remove();
      out.put("toxics", names(proxy));
    }
  }

  private static String json(Object v) {
    if (v == null) return "null";
    if (v instanceof Boolean || v instanceof Number) return v.toString();
    if (v instanceof Map) {
      StringBuilder b = new StringBuilder("{");
      for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
        if (b.length() > 1) b.append(',');
        b.append(json(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
      }
      return b.append('}').toString();
    }
    if (v instanceof List) {
      StringBuilder b = new StringBuilder("[");
      for (Object o : (List<?>) v) {
        if (b.length() > 1) b.append(',');
        b.append(json(o));
      }
      return b.append(']').toString();
    }
    StringBuilder b = new StringBuilder("\"");
    for (char c : v.toString().toCharArray()) {
      if (c == '"' || c == '\\') b.append('\\').append(c);
      else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
      else b.append(c);
    }
    return b.append('"').toString();
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 4) throw new IllegalArgumentException("usage: tcp|kafka API_HOST API_PORT UPSTREAM");
    ToxiproxyClient client = new ToxiproxyClient(args[1], Integer.parseInt(args[2]));
    String base = "http://" + args[1] + ":" + args[2];
    if (args[0].equals("tcp")) tcp(client, base, args[3]);
    else if (args[0].equals("kafka")) kafka(client, base, args[3]);
    else kafkaStep(client, base, args[0], args[3]);
    System.out.println(json(out));
  }
}
