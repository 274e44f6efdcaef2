// Config: kproxy's configuration as loaded from YAML (see config/config_loader.h and
// config/examples/). A Config is an immutable snapshot: the proxy shares it as
// `std::shared_ptr<const Config>` and swaps the pointer on reload.
//
//   listeners:                       # at least one
//     - name: kafka                  # unique; used in logs and metric labels
//       listen: 0.0.0.0:9092         # bootstrap port for clients
//       upstream: broker-1:9092      # bootstrap of the real cluster ("a:9092,b:9092" or a
//                                    # YAML list: tried in turn when one is unreachable)
//       advertise: localhost         # host written into rewritten broker addresses, and/or per
//                                    # node "1=host:port,2=host:port" (what clients are given)
//       broker_ports: 9093           # node id N is reached at 9093 + N, or instead:
//       # broker_port_range: 9100-9131   # ports handed out in order of discovery
//       max_broker_ports: 256        # brokers given a port at most; more are refused
//       tls: {...}                   # TLS for clients (config/tls_config.h)
//       upstream_tls: {...}          # TLS to the brokers (config/tls_config.h)
//       sni: {...}                   # one TLS port for every broker, by server name (config/sni_config.h)
//   admin: { listen: 127.0.0.1:9644, token_file: /run/secrets/kproxy-admin-token }  # or token_env: NAME
//   toxiproxy: { listen: 127.0.0.1:8474, max_proxies: 64 }  # Toxiproxy's HTTP API (docs/toxiproxy.md)
//   metrics: { frames: on, topic_labels: false, client_id_labels: false, max_label_values: 100 }
//   tap: { records: false, max_record_bytes: 256, max_records: 100 }
//   limits: { max_request_frame_bytes: 100MiB, max_response_frame_bytes: 256MiB, max_buffered_frame_bytes: 512MiB,
//             max_connections: 10000, connect_timeout: 10s, tls_handshake_timeout: 10s }
//   workers: 4                       # default: number of cores
//   drain_timeout: 30s
//   log: { format: text, level: info }
//   tracing: { endpoint: http://127.0.0.1:4318/v1/traces, service_name: kproxy, max_queue_spans: 2048,
//              max_spans_per_transaction: 128, batch: { max_spans: 512, interval: 1s }, timeout: 5s }
//   api_versions: [...]              # kept as YAML for the ApiVersions stage
//   faults: [...]                    # kept as YAML for the fault-rule stage
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/host_port.h"
#include "config/sni_config.h"
#include "config/tls_config.h"

namespace kproxy::config {

/// Default of listeners[].max_broker_ports: a broker port is a listening socket on every worker,
/// so one Metadata response naming thousands of brokers must not open thousands of them.
inline constexpr uint32_t kDefaultMaxBrokerPorts = 256;

/// How a listener gives each broker (by node id) its own kproxy port.
struct BrokerPorts {
  enum class Scheme : uint8_t {
    kNodeIdOffset,  ///< port = base + node id (stable across restarts and proxies)
    kInOrder,       ///< the next free port of [first, last], in order of discovery
    kKernel,        ///< `broker_ports: 0`: a port the kernel picks when the broker is first named
    kSni,           ///< an SNI listener (`sni:`): every broker at the one advertised port `base`, told apart by name
    /// `broker_ports: listen`: a single-broker cluster behind the listener's own port `base` (the
    /// bound port, set at start): the broker is advertised there, nothing else opens.
    kListenPort,
  };
  Scheme scheme = Scheme::kNodeIdOffset;
  uint16_t base = 0;   ///< kNodeIdOffset
  uint16_t first = 0;  ///< kInOrder
  uint16_t last = 0;   ///< kInOrder, inclusive
  /// Brokers this listener gives a port at most (listeners[].max_broker_ports); further nodes are
  /// refused at discovery (logged, counted in kproxy_proxy_broker_ports_refused_total).
  uint32_t max_ports = kDefaultMaxBrokerPorts;

  bool operator==(const BrokerPorts&) const = default;
};

/// An inclusive range of TCP ports.
struct PortRange {
  uint16_t first = 0;
  uint16_t last = 0;
  bool overlaps(uint16_t lo, uint16_t hi) const { return lo <= last && first <= hi; }
};

struct ListenerConfig {
  std::string name;
  HostPort listen;
  /// The first bootstrap server (= upstreams[0]).
  HostPort upstream;
  /// Every bootstrap server, in the order given. New client connections go to the one that last
  /// worked; a refused or timed-out connect moves on to the next for later connections.
  std::vector<HostPort> upstreams;
  /// Host clients are told to connect to for a broker (default: the listen host, when specific).
  std::string advertise;
  /// `advertise: "1=host:port,..."`: per broker node, the address clients are given instead of
  /// advertise:its kproxy port (e.g. a container's host-mapped port); kproxy still listens on the
  /// node's port from broker_ports.
  std::map<int32_t, HostPort> advertise_nodes;
  BrokerPorts broker_ports;
  /// Clients speak TLS to kproxy on this listener's ports (bootstrap and broker ports).
  std::optional<ServerTlsConfig> tls;
  /// kproxy speaks TLS to the bootstrap servers and every broker of this cluster.
  std::optional<UpstreamTlsConfig> upstream_tls;
  /// `proxy_protocol: v2`: every connection to this listener's ports starts with a PROXY
  /// protocol v2 header from a load balancer (proxy/net/proxy_header.h); one without is refused.
  bool proxy_protocol = false;
  /// `sni:`: one TLS port for the bootstrap and every broker, chosen by the ClientHello's server
  /// name (config/sni_config.h); broker_ports is then Scheme::kSni.
  std::optional<SniConfig> sni;
};

struct AdminConfig {
  /// Where the admin HTTP API and /metrics listen; unset = no admin listener.
  std::optional<HostPort> listen;
  /// The bearer token every admin request must carry, resolved when the config loads: the content
  /// of admin.token_file (surrounding whitespace stripped) or the value of the environment variable
  /// named by admin.token_env; with neither key, of $KPROXY_ADMIN_TOKEN if set (the older way); else
  /// no token. The same checks apply to each.
  std::optional<std::string> token;
  std::string token_origin;  ///< "file /run/secrets/admin-token" or "env NAME" (for the startup log)
};

/// toxiproxy: a second HTTP listener that speaks Toxiproxy v2's API (docs/toxiproxy.md). Off unless
/// `listen` is given.
struct ToxiproxyConfig {
  /// Where the Toxiproxy API listens (port 0: the kernel picks); unset = no Toxiproxy API.
  std::optional<HostPort> listen;
  /// Proxies that may exist at once; POST /proxies and /populate past it are refused.
  uint32_t max_proxies = 64;
};

/// metrics: what the Prometheus metrics count (proxy/metrics/).
struct MetricsConfig {
  /// Per-frame metrics and the tap (false: connection gauges and process counters only, and no
  /// transaction tracker).
  bool frames = true;
  /// With frames: count responses' error codes (kproxy_response_errors_total). false: bench/metrics
  /// measures what counting them costs.
  bool error_codes = true;
  /// With frames: the transaction tracker (kproxy_transactions_*, GET /transactions, traces).
  /// false: bench/proxy measures what the tracker costs.
  bool transactions = true;
  /// Opt-in kproxy_topic_requests_total{api,topic}: one series per topic a request names.
  bool topic_labels = false;
  /// Opt-in kproxy_client_requests_total{api,client_id}.
  bool client_id_labels = false;
  /// Distinct values kept per opt-in label; more are counted under "other" and in
  /// kproxy_label_values_folded_total{label}.
  size_t max_label_values = 100;
};

/// tap: what GET /tap may show.
struct TapConfig {
  /// Record contents (keys, values, headers of v2 record batches) in tap events; off: batches are
  /// only summarised (counts and bytes). SASL payloads are redacted either way.
  bool records = false;
  /// Bytes of each key, value and header value shown; longer ones are cut (and say so).
  size_t max_record_bytes = 256;
  /// Records shown per record set; the rest are counted.
  size_t max_records = 100;
};

inline constexpr size_t kMiB = size_t{1} << 20;

struct Limits {
  /// Largest request frame accepted from a client (Kafka's socket.request.max.bytes default).
  size_t max_request_frame_bytes = 100 * kMiB;
  /// Largest response frame accepted from a broker.
  size_t max_response_frame_bytes = 256 * kMiB;
  /// Memory all connections together may hold for frames still arriving (split across reads):
  /// the bytes received of them. Above it, kproxy stops reading the clients holding the most
  /// until it is back under seven eighths (proxy/connection/read_pressure.h); nobody is refused
  /// for it. At least each of the two frame limits above.
  size_t max_buffered_frame_bytes = 512 * kMiB;
  /// Announced size of all requests being forwarded while they arrive (cut-through, requests of
  /// 128 KiB and more), over all connections. A Kafka broker allocates a request's announced size
  /// as soon as its size prefix arrives, so this is what kproxy lets brokers hold for requests
  /// whose bytes have not all come: one that does not fit is gathered by kproxy instead (and
  /// counts in max_buffered_frame_bytes). 0: no request is forwarded before it is whole.
  size_t max_streamed_request_bytes = 64 * kMiB;
  /// A request being forwarded while it arrives closes its connection when none of its bytes
  /// arrive for this long (a broker holds the announced size meanwhile).
  std::chrono::milliseconds request_stall_timeout{30000};
  /// A request frame must be whole this long after its first byte arrived, or its connection is
  /// closed (a client sending a byte now and then holds two sockets and a connection slot for as
  /// long as it likes otherwise). Of the order of Kafka's request.timeout.ms (30 s).
  std::chrono::milliseconds request_completion_timeout{30000};
  /// A new connection must have sent its first whole request this long after the accept, or it is
  /// closed (a client that connects and never speaks, or dribbles its first bytes).
  std::chrono::milliseconds first_request_timeout{30000};
  /// After a client closed its side (half-close) with requests in flight, kproxy waits this long
  /// for their answers (longer only for a Produce whose own timeout is longer), then closes both
  /// sides: a broker that went silent never holds a connection for good.
  std::chrono::milliseconds unanswered_request_timeout{30000};
  /// Client connections open at once over all listeners and workers; more are refused.
  size_t max_connections = 10000;
  /// max_connections was not set in the file: the start lowers it to what the open-file limit
  /// holds (proxy/runtime/startup_check.h fit_max_connections) instead of warning.
  bool max_connections_default = true;
  /// How long an upstream connect (resolve + TCP) may take before the client is closed.
  std::chrono::milliseconds connect_timeout{10000};
  /// How long a client on a TLS listener may take to finish its handshake before it is closed
  /// (a client that connects and stalls would otherwise hold a connection slot for good).
  std::chrono::milliseconds tls_handshake_timeout{10000};
  /// On a `proxy_protocol: v2` listener, the PROXY header must arrive within this of the accept.
  std::chrono::milliseconds proxy_header_timeout{5000};
  /// Fault rules installed at once (the config's `faults:` and the admin API's together): each
  /// costs memory and is matched against every request of its APIs. PUT of a new rule past it is
  /// refused (400).
  size_t max_fault_rules = 1000;
};

struct LogConfig {
  enum class Format : uint8_t { kText, kJson };
  Format format = Format::kText;
  /// spdlog level name: trace, debug, info, warn, error, critical, off.
  std::string level = "info";
};

/// tracing: OpenTelemetry traces of transactions, exported with OTLP/HTTP (JSON) to a collector
/// (docs/transactions.md "Traces"). Absent: no tracing, and nothing of it costs anything.
struct TracingConfig {
  std::string endpoint;  ///< as written: http://host[:port][/path]
  std::string host;      ///< parsed from `endpoint`
  uint16_t port = 80;
  std::string path = "/v1/traces";  ///< the endpoint's path; /v1/traces when it gives none
  std::string service_name = "kproxy";
  /// Spans waiting for the exporter thread at most; a transaction whose spans do not fit is
  /// dropped whole (kproxy_trace_spans_dropped_total{reason="queue_full"}), never waited for.
  size_t max_queue_spans = 2048;
  /// Child spans (requests) kept per transaction; past it a request with an error or an EndTxn
  /// takes the place of the latest plain one, others are counted on the root span.
  size_t max_spans_per_transaction = 128;
  size_t batch_max_spans = 512;                    ///< spans per POST at most
  std::chrono::milliseconds batch_interval{1000};  ///< a partial batch waits this long at most
  std::chrono::milliseconds timeout{5000};         ///< one POST (connect, send, answer); also the flush at stop
};

/// A config section a later pipeline stage interprets, kept as YAML text plus its position.
struct PassThroughSection {
  std::string yaml;  ///< the section re-emitted as YAML; "" when absent
  int line = 0;      ///< 1-based line of the section's key in the file, 0 when absent
};

struct Config {
  std::string source;  ///< file the config came from (for messages)
  std::vector<ListenerConfig> listeners;
  AdminConfig admin;
  ToxiproxyConfig toxiproxy;
  MetricsConfig metrics;
  TapConfig tap;
  Limits limits;
  unsigned workers = 0;  ///< 0 = number of cores
  std::chrono::milliseconds drain_timeout{30000};
  LogConfig log;
  std::optional<TracingConfig> tracing;
  PassThroughSection api_versions;
  PassThroughSection faults;

  /// `workers`, with 0 resolved to the number of cores.
  unsigned worker_count() const;
};

}  // namespace kproxy::config
