#include "config/config_keys.h"

#include <algorithm>

namespace kproxy::config {

namespace {

// A KeyTarget for the member `path` of Config ("limits.connect_timeout", "tracing->timeout").
// clang-format off
#define KPROXY_KEY_FIELD(path) +[](Config& c) -> auto& { return c.path; }
// clang-format on

// The size prefix of a Kafka frame is an int32.
constexpr uint64_t kMaxFrame = 0x7fffffff;
constexpr std::string_view kFrameBad = "at most 2147483647 bytes (a frame size is an int32)";

// log.format's choices in the order `choices` names them.
constexpr void (*kSetLogFormat)(Config&, size_t) = [](Config& c, size_t choice) {
  c.log.format = choice == 0 ? LogConfig::Format::kText : LogConfig::Format::kJson;
};

// The rows, in config/README.md's order. Rows of kind kBespoke, and rows with no target, are read
// by their own code in config_loader.cc:
//   - listeners[] and everything under it: each entry builds one ListenerConfig whose keys depend
//     on each other (advertise defaults from listen and sni, broker_ports and broker_port_range
//     exclude each other, each port is claimed against the rest of the file, TLS files keep their
//     position for later errors). Its scalar keys (max_broker_ports, proxy_protocol, the tls,
//     upstream_tls and sni values) still take their kind, bounds and error text from their rows;
//   - admin.token_file, admin.token_env: one token resolved from either (or $KPROXY_ADMIN_TOKEN),
//     read when the config loads;
//   - tracing and tracing.endpoint: the section is optional as a whole, and the URL is split into
//     host, port and path;
//   - api_versions, faults: lists kept as YAML for the pipeline stages that interpret them.
// Checks across keys stay in config_loader.cc too (max_buffered_frame_bytes against the frame
// limits, max_spans_per_transaction against max_queue_spans, the port claims).
//
// GCC 12 warns about members a designated initializer leaves out; they take their defaults.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
constexpr KeySpec kKeys[] = {
    {.key = "listeners[]", .kind = KeyKind::kBespoke, .default_text = "(required)", .doc = "one entry per cluster kproxy fronts"},
    {.key = "listeners[].name",
     .kind = KeyKind::kBespoke,
     .default_text = "`listener-<i>`",
     .doc = "unique; appears in logs (`listener=kafka`, `kafka/node-3`)"},
    {.key = "listeners[].listen",
     .kind = KeyKind::kBespoke,
     .default_text = "(required)",
     .doc = "`host:port` of the bootstrap port clients connect to; port 0: the kernel picks a free one (see \"Port 0\")"},
    {.key = "listeners[].upstream",
     .kind = KeyKind::kBespoke,
     .default_text = "(required)",
     .doc = "bootstrap server(s) of the real cluster: `host:port`, `a:9092,b:9092` or a YAML list; a refused or timed-out connect moves "
            "later connections to the next one"},
    {.key = "listeners[].advertise",
     .kind = KeyKind::kBespoke,
     .default_text = "the listen host",
     .doc = "host written into every rewritten broker address; required when `listen` is a wildcard (`0.0.0.0`, `::`). Also per broker "
            "node, items `N=host:port` separated by `,` (`\"1=localhost:32771,2=localhost:32772\"`): node N is given that address instead "
            "(e.g. a container's host-mapped port) while kproxy still listens on its port from `broker_ports`; a bare host among them "
            "(`\"gw.example,1=gw.example:32771\"`) serves the nodes not listed (default: the listen host, on a wildcard listen the first "
            "item's host). Not taken with `sni`"},
    {.key = "listeners[].broker_ports",
     .kind = KeyKind::kBespoke,
     .default_text = "—",
     .doc = "base port: broker node N is reached at base + N; `0`: each broker gets a port the kernel picks when a response first names it "
            "(see \"Port 0\"); `listen`: a single-broker cluster, the broker advertised at the listener's own port (nothing else opens; a "
            "second broker is refused a port)"},
    {.key = "listeners[].broker_port_range",
     .kind = KeyKind::kBespoke,
     .default_text = "—",
     .doc = "`first-last`: ports handed out in order of discovery (give exactly one of the two)"},
    {.key = "listeners[].max_broker_ports",
     .kind = KeyKind::kCount,
     .min = 1,
     .max = 65535,
     .default_text = "`256`",
     .doc = "brokers this listener gives a port at most (1-65535): each broker port is a listening socket on every worker, so one response "
            "naming thousands of brokers must not open thousands of them. A node past the limit is refused at discovery (see Ports)"},
    {.key = "listeners[].tls.cert",
     .kind = KeyKind::kBespoke,
     .default_text = "(required in `tls`)",
     .doc = "PEM certificate chain (leaf first) kproxy presents to clients; its names must cover `advertise`"},
    {.key = "listeners[].tls.key",
     .kind = KeyKind::kBespoke,
     .default_text = "(required in `tls`)",
     .doc = "PEM private key of that certificate (unencrypted)"},
    {.key = "listeners[].tls.client_ca",
     .kind = KeyKind::kBespoke,
     .default_text = "unset",
     .doc = "PEM CAs client certificates must chain to; setting it makes `client_auth` default to `required`"},
    {.key = "listeners[].tls.client_auth",
     .kind = KeyKind::kChoice,
     .choices = "none, requested, required",
     .default_text = "`none` (`required` with `client_ca`)",
     .doc = "`none`, `requested` (verified if sent) or `required`"},
    {.key = "listeners[].tls.certificates",
     .kind = KeyKind::kBespoke,
     .default_text = "none",
     .doc = "more certificates, a list of `{cert, key}`: a client whose SNI one of them is valid for (its DNS names, a wildcard covering "
            "one label) is presented the first such, any other client `tls.cert` (chosen in OpenSSL's servername callback, on any TLS "
            "listener); reloaded with the others"},
    {.key = "listeners[].tls.certificates[].cert",
     .kind = KeyKind::kBespoke,
     .default_text = "(required in each entry)",
     .doc = "PEM certificate chain of one more certificate"},
    {.key = "listeners[].tls.certificates[].key",
     .kind = KeyKind::kBespoke,
     .default_text = "(required in each entry)",
     .doc = "PEM private key of that certificate"},
    {.key = "listeners[].tls.min_version",
     .kind = KeyKind::kChoice,
     .choices = "1.2, TLSv1.2, 1.3, TLSv1.3",
     .bad = "a TLS version (\"1.2\" or \"1.3\")",
     .default_text = "`\"1.2\"`",
     .doc = "lowest TLS version accepted from clients: `\"1.2\"` or `\"1.3\"`"},
    {.key = "listeners[].upstream_tls",
     .kind = KeyKind::kBespoke,
     .default_text = "—",
     .doc = "kproxy speaks TLS to the bootstrap servers and every broker (`upstream_tls:` alone: system CAs, all defaults)"},
    {.key = "listeners[].upstream_tls.ca",
     .kind = KeyKind::kBespoke,
     .default_text = "the system trust store",
     .doc = "PEM CAs broker certificates must chain to"},
    {.key = "listeners[].upstream_tls.cert",
     .kind = KeyKind::kBespoke,
     .default_text = "unset",
     .doc = "PEM client certificate for brokers that require one (mTLS); give both `cert` and `key`, or neither"},
    {.key = "listeners[].upstream_tls.key",
     .kind = KeyKind::kBespoke,
     .default_text = "unset",
     .doc = "PEM private key of `upstream_tls.cert`"},
    {.key = "listeners[].upstream_tls.verify_hostname",
     .kind = KeyKind::kFlag,
     .default_text = "`true`",
     .doc = "the broker's certificate must be issued for the host kproxy connects to (the bootstrap host, or the host the broker "
            "advertises); SNI carries that host either way"},
    {.key = "listeners[].upstream_tls.min_version",
     .kind = KeyKind::kChoice,
     .choices = "1.2, TLSv1.2, 1.3, TLSv1.3",
     .bad = "a TLS version (\"1.2\" or \"1.3\")",
     .default_text = "`\"1.2\"`",
     .doc = "lowest TLS version accepted from brokers"},
    {.key = "listeners[].proxy_protocol",
     .kind = KeyKind::kChoice,
     .choices = "v2, off",
     .bad = "v2 or off (version 1, the text form, is not taken: use send-proxy-v2)",
     .default_text = "`off`",
     .doc = "`v2`: every connection to this listener's ports starts with a PROXY protocol v2 header from a load balancer (HAProxy "
            "`send-proxy-v2`, AWS NLB, Envoy); see \"PROXY protocol\""},
    {.key = "listeners[].sni",
     .kind = KeyKind::kBespoke,
     .default_text = "unset",
     .doc = "one TLS port for the bootstrap and every broker, chosen by the name in the client's ClientHello (SNI); needs `tls:` (or "
            "`proxy_protocol: v2`: the header's authority TLV names the host when TLS ended at the load balancer), replaces `broker_ports` "
            "/ `broker_port_range`; see \"SNI listeners\""},
    {.key = "listeners[].sni.bootstrap",
     .kind = KeyKind::kBespoke,
     .default_text = "required",
     .doc = "the host name clients bootstrap with (matched without case, a trailing dot removed)"},
    {.key = "listeners[].sni.broker",
     .kind = KeyKind::kBespoke,
     .default_text = "required",
     .doc = "the host name of each broker, with one `$(nodeId)` (and any `$(listener)`, the listener's name): "
            "`broker-$(nodeId).kafka.example.com`"},
    {.key = "listeners[].sni.advertised_port",
     .kind = KeyKind::kCount,
     .min = 1,
     .max = 65535,
     .bad = "a port (1 to 65535)",
     .default_text = "the listen port",
     .doc = "the port written into every broker address kproxy rewrites (e.g. a load balancer's 443 in front of kproxy's 9092); required "
            "when the listen port is 0"},
    {.key = "listeners[].sni.unknown",
     .kind = KeyKind::kChoice,
     .choices = "refuse, bootstrap",
     .bad = "refuse or bootstrap",
     .default_text = "`refuse`",
     .doc = "a name that is neither, or none (a client connecting by IP address): `refuse` (TLS alert `unrecognized_name`, then close) or "
            "`bootstrap` (served as the bootstrap name)"},
    {.key = "listeners[].sni.client_hello_timeout",
     .kind = KeyKind::kDuration,
     .min = 1,
     .bad = "must be more than 0",
     .default_text = "`5s`",
     .doc = "the ClientHello must be whole within this of the accept (after the PROXY header, if any), else the connection is closed "
            "(`timeout`)"},
    {.key = "listeners[].sni.max_client_hello_bytes",
     .kind = KeyKind::kByteSize,
     .min = 512,
     .max = 1 << 20,
     .bad = "must be from 512 bytes to 1MiB",
     .default_text = "`16KiB`",
     .doc = "bytes read at most before the ClientHello is whole (512 B to 1 MiB), else closed (`too_large`)"},
    {.key = "admin.listen",
     .kind = KeyKind::kHostPort,
     .default_text = "unset",
     .doc = "`host:port` of the admin HTTP API and `/metrics`",
     .target = KPROXY_KEY_FIELD(admin.listen)},
    {.key = "admin.token_file",
     .kind = KeyKind::kBespoke,
     .default_text = "unset",
     .doc = "file holding the bearer token every admin request must send (`Authorization: Bearer <token>`, else 401); surrounding "
            "whitespace is stripped; read when the config loads (start, `check-config`, reload); a missing, unreadable or empty file, or a "
            "token with spaces or control characters, is a config error"},
    {.key = "admin.token_env",
     .kind = KeyKind::kBespoke,
     .default_text = "unset",
     .doc = "name of an environment variable holding the token (same rules; an unset variable is an error). Give `token_file` or "
            "`token_env`, not both. With neither, `$KPROXY_ADMIN_TOKEN` is used if set (the older way), else the admin API has no token. "
            "Tokens are compared in constant time"},
    {.key = "toxiproxy.listen",
     .kind = KeyKind::kHostPort,
     .default_text = "unset",
     .doc = "`host:port` of Toxiproxy's HTTP API (docs/toxiproxy.md); port 0: the kernel picks; no bearer token; its port is claimed like "
            "`admin.listen`'s",
     .target = KPROXY_KEY_FIELD(toxiproxy.listen)},
    {.key = "toxiproxy.max_proxies",
     .kind = KeyKind::kCount,
     .min = 1,
     .max = 1024,
     .default_text = "`64`",
     .doc = "Toxiproxy proxies that may exist at once (1-1024); `POST /proxies` or `/populate` past it gets 409",
     .target = KPROXY_KEY_FIELD(toxiproxy.max_proxies)},
    {.key = "metrics.frames",
     .kind = KeyKind::kFlag,
     .default_text = "`true`",
     .doc = "per-frame metrics, the tap and the transaction tracker; `false` leaves only connection gauges and process counters",
     .target = KPROXY_KEY_FIELD(metrics.frames)},
    {.key = "metrics.error_codes",
     .kind = KeyKind::kFlag,
     .default_text = "`true`",
     .doc = "with `frames`: count responses' error codes (`kproxy_response_errors_total`); `false` is for measuring what that costs "
            "(bench/metrics)",
     .target = KPROXY_KEY_FIELD(metrics.error_codes)},
    {.key = "metrics.transactions",
     .kind = KeyKind::kFlag,
     .default_text = "`true`",
     .doc = "with `frames`: the transaction tracker (`kproxy_transactions_*`, `GET /transactions`, `kproxy transactions`, traces); `false` "
            "is for measuring what it costs (bench/proxy)",
     .target = KPROXY_KEY_FIELD(metrics.transactions)},
    {.key = "metrics.topic_labels",
     .kind = KeyKind::kFlag,
     .default_text = "`false`",
     .doc = "opt-in `kproxy_topic_requests_total{api,topic}`: each request counts once per topic it names (requests are decoded for it; "
            "topics named by id only, Fetch/Produce v13+, are named from the ids seen in Metadata responses, else `unknown_topic_id`). The "
            "`metrics.*` keys are read at start",
     .target = KPROXY_KEY_FIELD(metrics.topic_labels)},
    {.key = "metrics.client_id_labels",
     .kind = KeyKind::kFlag,
     .default_text = "`false`",
     .doc = "opt-in `kproxy_client_requests_total{api,client_id}`",
     .target = KPROXY_KEY_FIELD(metrics.client_id_labels)},
    {.key = "metrics.max_label_values",
     .kind = KeyKind::kCount,
     .min = 1,
     .max = 10000,
     .default_text = "`100`",
     .doc = "distinct values kept per opt-in label (1-10000); further values are counted as `other`, and "
            "`kproxy_label_values_folded_total{label}` counts the requests folded so",
     .target = KPROXY_KEY_FIELD(metrics.max_label_values)},
    {.key = "tap.records",
     .kind = KeyKind::kFlag,
     .default_text = "`false`",
     .doc = "show record contents in `/tap` (v2 batches: offsets, timestamps, keys, values, headers); off, records are only counted",
     .target = KPROXY_KEY_FIELD(tap.records)},
    {.key = "tap.max_record_bytes",
     .kind = KeyKind::kCount,
     .min = 1,
     .max = 1 << 20,
     .default_text = "`256`",
     .doc = "bytes of each key, value and header value shown; longer ones are cut and marked",
     .target = KPROXY_KEY_FIELD(tap.max_record_bytes)},
    {.key = "tap.max_records",
     .kind = KeyKind::kCount,
     .min = 1,
     .max = 100000,
     .default_text = "`100`",
     .doc = "records shown per record set; the rest are counted. The `tap.*` keys are read at start; a reload does not change them",
     .target = KPROXY_KEY_FIELD(tap.max_records)},
    {.key = "limits.max_request_frame_bytes",
     .kind = KeyKind::kByteSize,
     .max = kMaxFrame,
     .bad = kFrameBad,
     .default_text = "`100MiB`",
     .doc = "larger request frames close the connection (Kafka's `socket.request.max.bytes`)",
     .target = KPROXY_KEY_FIELD(limits.max_request_frame_bytes)},
    {.key = "limits.max_response_frame_bytes",
     .kind = KeyKind::kByteSize,
     .max = kMaxFrame,
     .bad = kFrameBad,
     .default_text = "`256MiB`",
     .doc = "the same for broker responses",
     .target = KPROXY_KEY_FIELD(limits.max_response_frame_bytes)},
    {.key = "limits.max_buffered_frame_bytes",
     .kind = KeyKind::kByteSize,
     .default_text = "`512MiB`",
     .doc = "memory all connections together may hold for frames still arriving (split across reads), counted as the bytes received of "
            "them. Nobody is refused for it: above it, kproxy stops reading the clients whose partial request holds the most (largest "
            "first; a partial frame of at most 1 MiB is never stopped, broker responses never are) and reads them again once partial "
            "frames hold at most seven eighths of it; frames closest to complete keep going within a sixteenth of it per worker. Logged "
            "(at most one line per 10 s), counted in `kproxy_proxy_reads_paused_total{reason=\"frame_memory\"}`, paused now in "
            "`kproxy_proxy_reads_paused{reason=\"frame_memory\"}`, held now in `kproxy_partial_frame_bytes` (docs/architecture.md "
            "\"Memory\"). At least the larger of the two frame limits",
     .target = KPROXY_KEY_FIELD(limits.max_buffered_frame_bytes)},
    {.key = "limits.max_streamed_request_bytes",
     .kind = KeyKind::kByteSize,
     .default_text = "`64MiB`",
     .doc = "announced size of all requests kproxy forwards while they arrive (cut-through, requests of 128 KiB and more). A Kafka broker "
            "allocates a request's announced size when its size prefix arrives, so this is what brokers hold for clients' unfinished "
            "requests. Only a connection that has had an answer streams; a request that does not fit is gathered by kproxy instead (under "
            "`max_buffered_frame_bytes`; counted in `kproxy_proxy_requests_stream_refused_total`). `1`: nothing is streamed (a "
            "size is never 0)",
     .target = KPROXY_KEY_FIELD(limits.max_streamed_request_bytes)},
    {.key = "limits.request_stall_timeout",
     .kind = KeyKind::kDuration,
     .min = 1,
     .bad = "must be more than 0 (a request forwarded while it arrives gets that long between two reads)",
     .default_text = "`30s`",
     .doc = "a request being forwarded while it arrives closes its connection when none of its bytes arrive for this long "
            "(`reason=\"limit\"`, `kproxy_proxy_wait_deadlines_total`)",
     .target = KPROXY_KEY_FIELD(limits.request_stall_timeout)},
    {.key = "limits.request_completion_timeout",
     .kind = KeyKind::kDuration,
     .min = 1,
     .bad = "must be more than 0 (a request frame gets that long from its first byte to its last)",
     .default_text = "`30s`",
     .doc = "a request frame must be whole this long after its first byte arrived, else its connection is closed "
            "(`reason=\"request_timeout\"`, `kproxy_proxy_request_completion_deadlines_total`, at most one log line per 10 s besides the "
            "close line): a client sending a byte now and then holds no connection for good. Runs while kproxy pauses the client for "
            "memory too. Kafka clients' own `request.timeout.ms` is 30 s by default",
     .target = KPROXY_KEY_FIELD(limits.request_completion_timeout)},
    {.key = "limits.first_request_timeout",
     .kind = KeyKind::kDuration,
     .min = 1,
     .bad = "must be more than 0 (a new connection gets that long to send its first whole request)",
     .default_text = "`30s`",
     .doc = "a new connection must have sent its first whole request this long after the accept, else it is closed "
            "(`reason=\"first_request_timeout\"`, `kproxy_proxy_first_request_deadlines_total`, at most one log line per 10 s besides the "
            "close line)",
     .target = KPROXY_KEY_FIELD(limits.first_request_timeout)},
    {.key = "limits.unanswered_request_timeout",
     .kind = KeyKind::kDuration,
     .min = 1,
     .bad = "must be more than 0 (how long kproxy waits for the answers a client that closed its side still expects)",
     .default_text = "`30s`",
     .doc = "after a client closed its side (half-close) with requests in flight, kproxy waits this long for their answers, then closes "
            "both sides (`reason=\"unanswered\"`, `kproxy_proxy_wait_deadlines_total`): a broker that went silent never holds a connection "
            "for good. Kafka clients' own `request.timeout.ms` is 30 s by default",
     .target = KPROXY_KEY_FIELD(limits.unanswered_request_timeout)},
    {.key = "limits.max_connections",
     .kind = KeyKind::kCount,
     .min = 1,
     .bad = "a positive number",
     .default_text = "fits `RLIMIT_NOFILE`, at most `10000`",
     .doc = "client connections over all listeners; more are accepted and closed at once (one log line per 5 s says how many). Unset, it "
            "is 10000 when the open-file limit (raised to its hard limit at start) holds that many, else what the limit holds, said once "
            "at info level; set, a limit too low for it is warned about",
     .target = KPROXY_KEY_FIELD(limits.max_connections)},
    {.key = "limits.connect_timeout",
     .kind = KeyKind::kDuration,
     .default_text = "`10s`",
     .doc = "resolve + connect to a broker, else the client is closed",
     .target = KPROXY_KEY_FIELD(limits.connect_timeout)},
    {.key = "limits.proxy_header_timeout",
     .kind = KeyKind::kDuration,
     .min = 1,
     .bad = "must be more than 0 (a load balancer gets that long to send its PROXY header)",
     .default_text = "`5s`",
     .doc = "on a `proxy_protocol: v2` listener, the header must arrive within this of the accept, else the connection is closed "
            "(`kproxy_proxy_proxy_header_refusals_total`)",
     .target = KPROXY_KEY_FIELD(limits.proxy_header_timeout)},
    {.key = "limits.tls_handshake_timeout",
     .kind = KeyKind::kDuration,
     .min = 1,
     .bad = "must be more than 0 (a client gets that long to finish its TLS handshake)",
     .default_text = "`10s`",
     .doc = "a client on a TLS listener must finish its handshake within this, else it is closed (logged, counted in "
            "`kproxy_proxy_tls_failures_total`)",
     .target = KPROXY_KEY_FIELD(limits.tls_handshake_timeout)},
    {.key = "limits.max_fault_rules",
     .kind = KeyKind::kCount,
     .min = 1,
     .bad = "a positive number",
     .default_text = "`1000`",
     .doc = "fault rules installed at once, the `faults:` list and the admin API's together; a config with more is refused, a `PUT "
            "/faults/{name}` of a new rule past it gets 400 (logged, counted in `kproxy_admin_refusals_total{status=\"400\"}`)",
     .target = KPROXY_KEY_FIELD(limits.max_fault_rules)},
    {.key = "workers",
     .kind = KeyKind::kCount,
     .min = 1,
     .max = 1024,
     .bad = "a worker count (1 to 1024)",
     .default_text = "cores",
     .doc = "worker threads, each with its own event loop",
     .target = KPROXY_KEY_FIELD(workers)},
    {.key = "drain_timeout",
     .kind = KeyKind::kDuration,
     .default_text = "`30s`",
     .doc = "on SIGTERM/SIGINT: how long in-flight requests may take before connections are closed",
     .target = KPROXY_KEY_FIELD(drain_timeout)},
    {.key = "log.format",
     .kind = KeyKind::kChoice,
     .choices = "text, json",
     .default_text = "`text`",
     .doc = "`text` or `json` (one object per line)",
     .target = kSetLogFormat},
    {.key = "log.level",
     .kind = KeyKind::kChoice,
     .choices = "trace, debug, info, warn, error, critical, off",
     .default_text = "`info`",
     .doc = "`trace`, `debug`, `info`, `warn`, `error`, `critical`, `off`",
     .target = KPROXY_KEY_FIELD(log.level)},
    {.key = "tracing",
     .kind = KeyKind::kBespoke,
     .default_text = "unset",
     .doc = "OpenTelemetry traces of transactions, one trace per transaction with a span per request of it, sent with OTLP/HTTP (JSON) to "
            "a collector (docs/transactions.md \"Traces\"). Unset: no tracing, and nothing of it runs. Needs the frame observer "
            "(`metrics.frames`). The `tracing.*` keys are read at start; a reload does not change them"},
    {.key = "tracing.endpoint",
     .kind = KeyKind::kBespoke,
     .default_text = "(required in `tracing`)",
     .doc = "the collector's OTLP/HTTP traces URL, `http://host[:port][/path]`: port 80 when none, path `/v1/traces` when none (e.g. "
            "`http://127.0.0.1:4318/v1/traces`). Plain HTTP only: `https://` is refused (send to a collector on the host or its network)"},
    {.key = "tracing.service_name",
     .kind = KeyKind::kString,
     .min = 1,
     .default_text = "`kproxy`",
     .doc = "the spans' `service.name`",
     .target = KPROXY_KEY_FIELD(tracing->service_name)},
    {.key = "tracing.max_queue_spans",
     .kind = KeyKind::kCount,
     .min = 2,
     .max = 1000000,
     .default_text = "`2048`",
     .doc = "spans waiting for the exporter thread at most (2-1000000). A transaction whose spans do not fit is dropped whole and counted "
            "(`kproxy_trace_spans_dropped_total{reason=\"queue_full\"}`): a worker never waits for the collector",
     .target = KPROXY_KEY_FIELD(tracing->max_queue_spans)},
    {.key = "tracing.max_spans_per_transaction",
     .kind = KeyKind::kCount,
     .min = 1,
     .max = 100000,
     .default_text = "`128`",
     .doc = "request spans kept per transaction (1-100000; with the root span it must fit in `max_queue_spans`); past it a request with an "
            "error, or an EndTxn, takes the place of the latest plain one, and the rest are counted (`reason=\"per_transaction_limit\"`, "
            "and `kproxy.requests_dropped` on the root span)",
     .target = KPROXY_KEY_FIELD(tracing->max_spans_per_transaction)},
    {.key = "tracing.batch.max_spans",
     .kind = KeyKind::kCount,
     .min = 1,
     .max = 100000,
     .default_text = "`512`",
     .doc = "spans per POST at most; a full batch is sent at once",
     .target = KPROXY_KEY_FIELD(tracing->batch_max_spans)},
    {.key = "tracing.batch.interval",
     .kind = KeyKind::kDuration,
     .min = 1,
     .bad = "must be more than 0",
     .default_text = "`1s`",
     .doc = "a partial batch waits this long at most; the tracker is also swept this often, so a transaction that times out is exported "
            "without a scrape",
     .target = KPROXY_KEY_FIELD(tracing->batch_interval)},
    {.key = "tracing.timeout",
     .kind = KeyKind::kDuration,
     .min = 1,
     .bad = "must be more than 0",
     .default_text = "`5s`",
     .doc = "one POST (connect, send, answer); a batch not accepted within it is dropped and counted (`reason=\"export_failed\"`, "
            "`kproxy_trace_export_failures_total`), not retried. At stop, what is queued is sent within this time; the rest is dropped "
            "(`reason=\"shutdown\"`)",
     .target = KPROXY_KEY_FIELD(tracing->timeout)},
    {.key = "api_versions",
     .kind = KeyKind::kBespoke,
     .default_text = "—",
     .doc = "list of API and feature entries, interpreted by the ApiVersions stage (docs/api-versions-policy.md)"},
    {.key = "faults", .kind = KeyKind::kBespoke, .default_text = "—", .doc = "list, interpreted by the fault-rule stage"},
};
#pragma GCC diagnostic pop

#undef KPROXY_KEY_FIELD

// Splits `key` at its last '.' (the top level has none).
size_t last_dot(std::string_view key) { return key.rfind('.'); }

}  // namespace

std::string_view KeySpec::parent() const {
  size_t dot = last_dot(key);
  return dot == std::string_view::npos ? std::string_view() : key.substr(0, dot);
}

std::string_view KeySpec::name() const {
  size_t dot = last_dot(key);
  std::string_view last = dot == std::string_view::npos ? key : key.substr(dot + 1);
  if (last.ends_with("[]")) last.remove_suffix(2);
  return last;
}

std::span<const KeySpec> config_keys() { return kKeys; }

const KeySpec* find_key(std::string_view key) {
  for (const KeySpec& k : kKeys) {
    if (k.key == key) return &k;
  }
  return nullptr;
}

std::vector<std::string_view> child_keys(std::string_view path) {
  std::vector<std::string_view> out;
  for (const KeySpec& k : kKeys) {
    std::string_view rest = k.key;
    if (!path.empty()) {
      if (!rest.starts_with(path) || rest.size() <= path.size() || rest[path.size()] != '.') continue;
      rest.remove_prefix(path.size() + 1);
    }
    std::string_view child = rest.substr(0, rest.find('.'));
    if (child.ends_with("[]")) child.remove_suffix(2);
    if (std::find(out.begin(), out.end(), child) == out.end()) out.push_back(child);
  }
  return out;
}

std::string config_keys_markdown() {
  std::string out = "| key | default | meaning |\n|---|---|---|\n";
  for (const KeySpec& k : kKeys) {
    out += "| `";
    out += k.key;
    out += "` | ";
    out += k.default_text;
    out += " | ";
    out += k.doc;
    out += " |\n";
  }
  return out;
}

std::optional<std::string> with_key_table(std::string_view markdown) {
  constexpr std::string_view kHeader = "| key | default | meaning |\n";
  size_t begin = 0;
  if (!markdown.starts_with(kHeader)) {
    size_t at = markdown.find("\n" + std::string(kHeader));
    if (at == std::string_view::npos) return std::nullopt;
    begin = at + 1;
  }
  size_t end = begin;
  while (end < markdown.size() && markdown[end] == '|') {
    size_t eol = markdown.find('\n', end);
    end = eol == std::string_view::npos ? markdown.size() : eol + 1;
  }
  std::string out(markdown.substr(0, begin));
  out += config_keys_markdown();
  out += markdown.substr(end);
  return out;
}

}  // namespace kproxy::config
