// Testcontainers' ToxiproxyContainer (org.testcontainers:testcontainers-toxiproxy, pinned in pom.xml
// beside this file) running kproxy's image in place of Toxiproxy's, driven through the module's
// toxiproxy-java client: tests/container/test_testcontainers.py (docs/toxiproxy.md, "Testcontainers").
//
//   java -cp ... KproxyToxiproxyContainer IMAGE NETWORK_MODE CONTAINER_NAME CONFIG_FILE
//
// The container gets CONFIG_FILE as /etc/kproxy/config.yaml (the image's ENTRYPOINT reads it; it
// turns the Toxiproxy API on at 0.0.0.0:8474) and NETWORK_MODE (the test passes slirp4netns: see
// docs/toxiproxy.md for why the engine's default bridge is not used here). One proxy is created
// through the client on the module's first proxied port, 8666, with kproxy's admin API inside
// the container (127.0.0.1:9644, plain HTTP) as its upstream; HTTP requests through the mapped
// port are timed without a toxic, with a latency toxic and after its removal. Prints one JSON
// object as its last stdout line; the test asserts on it. Every socket operation has a timeout.
import eu.rekawek.toxiproxy.Proxy;
import eu.rekawek.toxiproxy.ToxiproxyClient;
import eu.rekawek.toxiproxy.model.ToxicDirection;
import eu.rekawek.toxiproxy.model.toxic.Latency;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.images.builder.Transferable;
import org.testcontainers.toxiproxy.ToxiproxyContainer;
import org.testcontainers.utility.DockerImageName;

public class KproxyToxiproxyContainer {
  static final int PROXIED_PORT = 8666;  // the module's first proxied port (8666..8697)
  static final String UPSTREAM = "127.0.0.1:9644";  // kproxy's admin API inside the container
  static final int LATENCY_MS = 300;
  static final int SAMPLES = 5;
  static final Map<String, Object> out = new LinkedHashMap<>();

  public static void main(String[] args) throws Exception {
    String image = args[0];
    String networkMode = args[1];
    String name = args[2];
    byte[] config = Files.readAllBytes(Path.of(args[3]));

    var version = DockerClientFactory.instance().client().versionCmd().exec();
    out.put("engine", version.getVersion() + " (API " + version.getApiVersion() + ")");

    ToxiproxyContainer toxiproxy =
        new ToxiproxyContainer(DockerImageName.parse(image).asCompatibleSubstituteFor("ghcr.io/shopify/toxiproxy"))
            .withNetworkMode(networkMode)
            .withCopyToContainer(Transferable.of(config, 0644), "/etc/kproxy/config.yaml")
            .withCreateContainerCmdModifier(cmd -> cmd.withName(name))
            .withStartupTimeout(Duration.ofSeconds(60));
    try {
      long t0 = System.nanoTime();
      toxiproxy.start();
      out.put("start_seconds", seconds(t0));
      out.put("container_id", toxiproxy.getContainerId());
      out.put("host", toxiproxy.getHost());
      out.put("control_port", toxiproxy.getControlPort());
      out.put("network_mode", toxiproxy.getContainerInfo().getHostConfig().getNetworkMode());
      int mapped = toxiproxy.getMappedPort(PROXIED_PORT);
      out.put("mapped_port", mapped);

      ToxiproxyClient client = new ToxiproxyClient(toxiproxy.getHost(), toxiproxy.getControlPort());
      out.put("version", client.version());
      Proxy proxy = client.createProxy("admin", "0.0.0.0:" + PROXIED_PORT, UPSTREAM);
      out.put("created", Map.of("name", proxy.getName(), "listen", proxy.getListen(), "upstream", proxy.getUpstream()));
      // kproxy's extension fields (kafka, relay) as the API answers them; the client drops them
      out.put("proxy_json", httpGet("http://" + toxiproxy.getHost() + ":" + toxiproxy.getControlPort() + "/proxies/admin"));

      String through = toxiproxy.getHost() + ":" + mapped;
      out.put("plain", sample(through));
      Latency latency = proxy.toxics().latency("slow", ToxicDirection.DOWNSTREAM, LATENCY_MS);
      out.put("toxics_listed", proxy.toxics().getAll().size());
      out.put("latency_ms", latency.getLatency());
      out.put("with_latency", sample(through));
      latency.remove();
      out.put("toxics_after_remove", proxy.toxics().getAll().size());
      out.put("after_remove", sample(through));
      proxy.delete();
      out.put("proxies_after_delete", client.getProxies().size());
    } catch (Exception e) {
      out.put("error", e.toString());
      for (Throwable c = e.getCause(); c != null; c = c.getCause()) out.put("cause", c.toString());
      try {
        String logs = toxiproxy.getLogs();
        out.put("container_logs", logs.substring(Math.max(0, logs.length() - 3000)));
      } catch (Exception ignored) {
        // the container never started
      }
    } finally {
      toxiproxy.stop();
    }
    System.out.println(toJson(out));
  }

  static double seconds(long t0) {
    return (System.nanoTime() - t0) / 1e9;
  }

  /** SAMPLES HTTP/1.0 GET /healthz requests, each on a new connection through the proxy. */
  static List<Map<String, Object>> sample(String addr) {
    List<Map<String, Object>> list = new ArrayList<>();
    for (int i = 0; i < SAMPLES; i++) list.add(healthz(addr));
    return list;
  }

  static Map<String, Object> healthz(String addr) {
    Map<String, Object> r = new LinkedHashMap<>();
    int colon = addr.lastIndexOf(':');
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress(addr.substring(0, colon), Integer.parseInt(addr.substring(colon + 1))), 5000);
      s.setSoTimeout(15000);
      long t0 = System.nanoTime();
      s.getOutputStream().write("GET /healthz HTTP/1.0\r\nHost: kproxy\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
      s.getOutputStream().flush();
      InputStream in = s.getInputStream();
      ByteArrayOutputStream got = new ByteArrayOutputStream();
      byte[] buf = new byte[4096];
      for (int n; (n = in.read(buf)) > 0;) got.write(buf, 0, n);
      r.put("seconds", seconds(t0));
      String text = got.toString(StandardCharsets.ISO_8859_1);
      r.put("status_line", text.contains("\r\n") ? text.substring(0, text.indexOf("\r\n")) : text);
      r.put("bytes", got.size());
    } catch (IOException e) {
      r.put("error", e.toString());
    }
    return r;
  }

  static String httpGet(String url) throws IOException {
    HttpURLConnection c = (HttpURLConnection) new URL(url).openConnection();
    c.setConnectTimeout(5000);
    c.setReadTimeout(15000);
    try (InputStream in = c.getInputStream()) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } finally {
      c.disconnect();
    }
  }

  static String toJson(Object v) {
    if (v == null) return "null";
    if (v instanceof Number || v instanceof Boolean) return v.toString();
    if (v instanceof Map<?, ?> m) {
      StringBuilder b = new StringBuilder("{");
      for (var e : m.entrySet()) {
        if (b.length() > 1) b.append(',');
        b.append(toJson(String.valueOf(e.getKey()))).append(':').append(toJson(e.getValue()));
      }
      return b.append('}').toString();
    }
    if (v instanceof List<?> l) {
      StringBuilder b = new StringBuilder("[");
      for (Object o : l) {
        if (b.length() > 1) b.append(',');
        b.append(toJson(o));
      }
      return b.append(']').toString();
    }
    StringBuilder b = new StringBuilder("\"");
    for (char ch : v.toString().toCharArray()) {
      switch (ch) {
        case '"' -> b.append("\\\"");
        case '\\' -> b.append("\\\\");
        case '\n' -> b.append("\\n");
        case '\r' -> b.append("\\r");
        case '\t' -> b.append("\\t");
        default -> {
          if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
          else b.append(ch);
        }
      }
    }
    return b.append('"').toString();
  }
}
