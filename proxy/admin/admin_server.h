// AdminServer: kproxy's admin HTTP API (JSON), /metrics, /healthz, /readyz and the /tap stream.
//
//   client ──TCP──► reader thread (poll: accept, read head + body, deadlines, caps)
//                        │ whole requests only
//                        ├─► probe lanes: one thread per probe path (/healthz, /readyz)
//                        └─► request lane: `max_connections` threads ──► AdminServer::handle
//                                                                          ├─ bearer check
//                                                                          └─ route table ─► Handler | StreamHandler
//
// Why a reader thread: a client that sends its request slowly (one byte, or a byte every 10 s)
// must not hold a serving thread, or a few of them starve every other client, the Kubernetes
// probes included (issue #15). The reader reads every connection's head and body without
// blocking; a thread is given a request only once it has fully arrived. Probes have lanes of
// their own, so neither slow clients nor slow handlers (a large /metrics, open /tap streams)
// delay /healthz or /readyz.
//
// Limits (AdminServerOptions; docs/admin-api.openapi.yaml "Limits"): the head must arrive within
// `head_timeout` of the connection (then 408) and be at most kMaxHeadBytes (431); the body within
// `body_timeout` (408) and at most `max_body_bytes` (413, sent before the body is read, as is
// 401 for a missing token). At most `max_pending` connections are read at once, and at most
// `max_pending_per_address` from one client address: past either, the oldest of them is dropped
// (503), so a newcomer such as a probe always gets in. A lane whose queue is full answers 503.
// `max_streams` streaming subscribers at once (more get 503). A path that decodes to a control
// character or NUL gets 400, and so does a body that nests JSON deeper than kMaxJsonDepth
// (checked before any handler parses it: recursive JSON code would overflow the stack). Every
// refusal is counted (AdminServer::refusals) and logged, at most kRefusalLogBurst lines per 10 s.
//
// Served on its own threads, never on a worker loop: a handler may take locks and read the
// Proxy's snapshots, but must not touch a worker's handles (use Worker::post).
//
// The contract of every route is docs/admin-api.openapi.yaml (served at GET /openapi.json).
//
// Other modules register their routes before or after start():
//
//   server.route("PUT", "/faults/{name}", [](const HttpRequest& r) {
//     return HttpResponse{200, "application/json", "{\"name\":\"" + r.path_params.at("name") + "\"}"};
//   });
//
// A route's pattern is a path whose segments are literal or `{param}` (one whole segment). An
// exact literal route wins over a parameterised one. A path that matches but with another method
// gets 405; no match gets 404.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/admin/http_head.h"
#include "proxy/metrics/labelled_counter.h"
#include "proxy/util/clock.h"

namespace kproxy::admin {

struct HttpRequest {
  std::string method;  ///< "GET", "PUT", ...
  std::string path;    ///< URL-decoded path, without the query
  std::string query;   ///< raw query string (after '?'), "" when none
  std::string body;
  std::map<std::string, std::string> path_params;   ///< from `{name}` segments
  std::map<std::string, std::string> query_params;  ///< URL-decoded; a repeated key keeps the last
  std::map<std::string, std::string> headers;       ///< names lower-cased
  std::string remote;                               ///< "addr:port" of the client ("" in tests)

  /// Header value by case-insensitive name, "" when absent.
  std::string header(std::string_view name) const;
  /// Query parameter or `fallback`.
  std::string query_param(const std::string& name, std::string fallback = "") const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  /// 405: the methods the path serves, for the Allow header RFC 9110 §15.5.6 requires ("GET, HEAD").
  std::string allow{};
};

/// `{"error": message}` with `status` (400, 404, ...). Bytes of `message` that are not UTF-8
/// (e.g. from a path) are replaced, never thrown on.
HttpResponse json_error(int status, std::string_view message);

/// Admin request bodies may nest JSON arrays/objects at most this deep (a fault rule needs 3).
constexpr size_t kMaxJsonDepth = 32;
/// True when `text`, read as JSON, opens more than `max_depth` arrays/objects at once (strings
/// and escapes are skipped; the text need not be valid JSON). Linear, no recursion.
bool json_too_deep(std::string_view text, size_t max_depth = kMaxJsonDepth);

/// The statuses AdminServer::refusals counts.
inline constexpr int kRefusalStatuses[] = {400, 401, 404, 405, 408, 409, 411, 413, 422, 431, 503};
/// A request head (request line and headers) may be at most this long (431 past it).
constexpr size_t kMaxHeadBytes = 16 * 1024;
/// At most this many refusal log lines per 10 s (then one line says how many were not logged).
constexpr unsigned kRefusalLogBurst = 20;
/// Starts a new refusal-log window now (tests).
void reset_refusal_log_budget();

using Handler = std::function<HttpResponse(const HttpRequest&)>;

/// The writing end of a streaming response (chunked transfer encoding). Blocking, on the
/// server thread that serves the request.
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  /// Sends `data` as one chunk; false once the client is gone (stop streaming then).
  virtual bool write(std::string_view data) = 0;
  /// True once the server is stopping: return from the stream handler.
  virtual bool stopping() const = 0;
};

/// Streams until the client goes away or the server stops. The status line and headers (200,
/// `content_type`) are sent before the handler runs; to refuse a request, return a response from
/// the route's `precheck` instead.
using StreamHandler = std::function<void(const HttpRequest&, StreamWriter&)>;
/// Runs before the stream starts; a response with status != 200 is sent instead of streaming.
using StreamPrecheck = std::function<HttpResponse(const HttpRequest&)>;

struct AdminServerOptions {
  std::string listen = "127.0.0.1:9644";  ///< "host:port" or "[v6]:port"; port 0 = any free port
  std::string bearer_token;               ///< "" = no authentication
  unsigned max_connections = 16;          ///< requests served at once (threads of the request lane)
  unsigned max_streams = 4;               ///< streaming subscribers at once (< max_connections)
  size_t max_body_bytes = 1 << 20;        ///< larger request bodies get 413
  /// GET/HEAD paths served on a lane (thread and queue) of their own each: what a liveness or
  /// readiness probe asks must not wait behind other clients.
  std::vector<std::string> probe_paths = {"/healthz", "/readyz"};
  /// From accept to the head's empty line; a client still sending its head then gets 408.
  std::chrono::milliseconds head_timeout{5000};
  /// From the head to the body's last byte (408 past it).
  std::chrono::milliseconds body_timeout{10000};
  /// Connections whose request is still arriving, in all and from one client address; past
  /// either, the oldest such connection is dropped (503).
  unsigned max_pending = 256;
  unsigned max_pending_per_address = 32;
  /// Whole requests waiting for a thread, per lane (503 past it).
  unsigned max_queued = 64;
  /// A response write that makes no progress for this long ends the connection (a client that
  /// does not read, e.g. a stalled /tap subscriber).
  std::chrono::milliseconds write_timeout{10000};
  /// Where the head, body and linger deadlines read "now" (null: the steady clock). A test hands
  /// in one it moves by hand (tests/unit/support/manual_clock.h), then calls AdminServer::wake().
  const util::Clock* clock = nullptr;
};

/// What the server makes of a request head before reading the body: the request (path decoded,
/// query parsed, headers) and how many body bytes to read, or the refusal to send at once (a bad
/// path or query 400, no token 401, body over the cap 413).
struct Admission {
  bool refused = false;
  HttpResponse refusal;  ///< when refused
  HttpRequest request;   ///< everything but the body
  size_t body_bytes = 0;
  bool expect_continue = false;
};

class AdminServer {
 public:
  explicit AdminServer(AdminServerOptions options = {});
  ~AdminServer();  ///< stops
  /// This server's refusals by status (kRefusalStatuses) since it was made. A handler's own 503
  /// (a health probe saying "not ready") is an answer, not a refusal; the 503s counted are the
  /// server's (too many streams, connections or queued requests).
  uint64_t refusals(int status) const;
  /// The same counts as kproxy_admin_refusals_total{status} (its owner exports it:
  /// metrics::ProxyMetrics::export_counter).
  const metrics::LabelledCounter& refusal_counter() const { return refusals_; }
  /// Makes the reader thread look at its deadlines now (after a test moved options.clock).
  void wake();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  /// Registers (or replaces) the handler for `method` + `pattern`. Safe from any thread, at any time.
  void route(std::string method, std::string pattern, Handler handler);
  /// Registers a streaming GET route (e.g. /tap).
  void stream_route(std::string pattern, std::string content_type, StreamPrecheck precheck, StreamHandler handler);

  /// Starts listening. Returns "" or the error (then nothing listens).
  std::string start();
  /// Stops: ends streams, waits for the threads serving requests. Idempotent.
  void stop();

  /// The port actually bound (useful with port 0), 0 when not started.
  uint16_t port() const { return port_; }
  const AdminServerOptions& options() const { return options_; }
  /// Streams open now.
  unsigned open_streams() const { return open_streams_.load(); }

  /// Dispatches one request as if it had arrived over HTTP (tests; also used by the server).
  /// Streaming routes are not served here (404). Refusals are counted and logged.
  HttpResponse handle(HttpRequest request) const;
  /// Checks a parsed head the way the server does before it reads the body (not counted: the
  /// caller notes a refusal).
  Admission admit(const RequestHead& head, std::string remote) const;
  /// Serves `message` (head and body bytes as a client sent them) through the steps the server
  /// runs: parse_request_head, admit, body, handle. An incomplete message gets the 408 the
  /// server sends at its deadline. The admin request fuzzer's entry point.
  HttpResponse handle_message(std::string_view message, std::string remote = "") const;

  /// One registered route: method, pattern as registered ("/faults/{name}"), streaming or not.
  struct RouteInfo {
    std::string method;
    std::string pattern;
    bool streaming = false;
  };
  /// Every route registered, in registration order (the OpenAPI agreement test reads this).
  std::vector<RouteInfo> routes() const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;
    bool streaming = false;
    std::string content_type;
    Handler handler;
    StreamPrecheck precheck;
    StreamHandler stream;
  };
  /// Adds a route, replacing one with the same method and pattern.
  void add_route(std::shared_ptr<Route> r);
  /// Finds the route; fills path params. Sets *method_mismatch when only the method differs, and
  /// then `allowed` (if given) to the methods the path serves ("GET, HEAD, PUT").
  std::shared_ptr<const Route> find(const std::string& method, const std::string& path, std::map<std::string, std::string>& params,
                                    bool* method_mismatch, std::string* allowed = nullptr) const;
  bool authorized(const HttpRequest& request) const;
  /// handle() without the refusal accounting.
  HttpResponse dispatch(HttpRequest& request) const;
  /// Counts and logs `response` when it refuses `request`.
  void note_refusal(const HttpRequest& request, const HttpResponse& response) const;
  /// Serves one whole request on a lane thread and closes `fd`.
  void serve(int fd, HttpRequest request);
  /// Notes a refusal of a connection whose request never fully arrived.
  void note_dropped(const std::string& remote, std::string_view method, std::string_view target, const HttpResponse& response) const;

  struct Network;  // listening sockets, the reader thread, the lanes (admin_server.cc)
  friend struct Network;

  AdminServerOptions options_;
  mutable metrics::LabelledCounter refusals_;  ///< kproxy_admin_refusals_total{status} (counted from const handlers)
  mutable std::mutex routes_mutex_;
  std::vector<std::shared_ptr<const Route>> routes_;
  std::unique_ptr<Network> network_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<unsigned> open_streams_{0};
};

/// Parses "a=1&b=x%20y" into a map (URL-decoded, '+' = space). Returns false on a bad escape.
bool parse_query(std::string_view query, std::map<std::string, std::string>& out);
/// Percent-decodes `text` ('+' as space when `plus_is_space`). nullopt-like: false on a bad escape.
bool url_decode(std::string_view text, std::string& out, bool plus_is_space);
/// True when `given` equals `expected` (the secret), compared in time that depends only on the
/// secret's length: not on where the strings differ.
bool constant_time_equal(std::string_view given, std::string_view expected);

}  // namespace kproxy::admin
