#include "proxy/admin/admin_server.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include <civetweb.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace kproxy::admin {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> segments;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') { ++i; continue; }
    size_t end = path.find('/', i);
    if (end == std::string_view::npos) end = path.size();
    segments.emplace_back(path.substr(i, end - i));
    i = end;
  }
  return segments;
}

bool is_param(const std::string& segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

/// civetweb wants numeric addresses; "localhost" and wildcards are spelled out here.
std::string civetweb_listen(const std::string& listen, std::string* error) {
  std::string host, port;
  if (!listen.empty() && listen.front() == '[') {
    size_t close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      *error = "bad admin listen address '" + listen + "'";
      return "";
    }
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
    return "[" + (host.empty() ? std::string("::") : host) + "]:" + port;
  }
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    *error = "bad admin listen address '" + listen + "' (want host:port)";
    return "";
  }
  host = listen.substr(0, colon);
  port = listen.substr(colon + 1);
  if (host == "localhost") host = "127.0.0.1";
  if (host.empty()) host = "0.0.0.0";
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + port;
  return host + ":" + port;
}

/// What a log line may show of a client-supplied string: printable ASCII, the rest as \xNN, at
/// most 200 bytes.
std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (s.size() > 200) out += "...";
  return out;
}

bool has_control_character(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

std::array<std::atomic<uint64_t>, std::size(kRefusalStatuses)> g_refusals{};

/// Refusal log lines: at most kRefusalLogBurst per 10 s window, process-wide.
struct RefusalLogBudget {
  std::mutex mutex;
  std::chrono::steady_clock::time_point window_start{};
  unsigned logged = 0;
  uint64_t suppressed = 0;
};
RefusalLogBudget g_refusal_log;

class CivetStreamWriter final : public StreamWriter {
 public:
  CivetStreamWriter(mg_connection* conn, const std::atomic<bool>& stopping) : conn_(conn), stopping_(stopping) {}
  bool write(std::string_view data) override {
    if (failed_) return false;
    if (data.empty()) return true;
    if (mg_send_chunk(conn_, data.data(), static_cast<unsigned>(data.size())) <= 0) failed_ = true;
    return !failed_;
  }
  bool stopping() const override { return stopping_.load(std::memory_order_relaxed); }

 private:
  mg_connection* conn_;
  const std::atomic<bool>& stopping_;
  bool failed_ = false;
};

int send_response(mg_connection* conn, const HttpResponse& response) {
  mg_response_header_start(conn, response.status);
  mg_response_header_add(conn, "Content-Type", response.content_type.c_str(), -1);
  std::string length = std::to_string(response.body.size());
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  if (response.status == 401) mg_response_header_add(conn, "WWW-Authenticate", "Bearer", -1);
  mg_response_header_send(conn);
  if (!response.body.empty()) mg_write(conn, response.body.data(), response.body.size());
  return response.status;
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

std::string HttpRequest::query_param(const std::string& name, std::string fallback) const {
  auto it = query_params.find(name);
  return it == query_params.end() ? fallback : it->second;
}

HttpResponse json_error(int status, std::string_view message) {
  nlohmann::json body = {{"error", std::string(message)}};
  return HttpResponse{status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
}

bool json_too_deep(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

void reset_refusal_log_budget() {
  std::lock_guard lock(g_refusal_log.mutex);
  g_refusal_log.window_start = std::chrono::steady_clock::now();
  g_refusal_log.logged = 0;
  g_refusal_log.suppressed = 0;
}

uint64_t admin_refusals(int status) {
  for (size_t i = 0; i < std::size(kRefusalStatuses); ++i) {
    if (kRefusalStatuses[i] == status) return g_refusals[i].load(std::memory_order_relaxed);
  }
  return 0;
}

bool url_decode(std::string_view text, std::string& out, bool plus_is_space) {
  out.clear();
  out.reserve(text.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return false;
      int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return true;
}

bool parse_query(std::string_view query, std::map<std::string, std::string>& out) {
  size_t i = 0;
  while (i <= query.size()) {
    size_t end = query.find('&', i);
    if (end == std::string_view::npos) end = query.size();
    std::string_view pair = query.substr(i, end - i);
    if (!pair.empty()) {
      size_t eq = pair.find('=');
      std::string key, value;
      if (!url_decode(pair.substr(0, eq), key, true)) return false;
      if (eq != std::string_view::npos && !url_decode(pair.substr(eq + 1), value, true)) return false;
      if (key.empty()) return false;
      out[key] = value;
    }
    i = end + 1;
  }
  return true;
}

bool constant_time_equal(std::string_view given, std::string_view expected) {
  // The loop runs over the expected value's length whatever is given, and every byte is folded
  // into one accumulator (no early exit), so the time says nothing about how much of a guess was
  // right nor how long the secret is beyond what the guess's own length already tells.
  const size_t n = given.size();
  size_t diff = n ^ expected.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = n == 0 ? 0 : static_cast<unsigned char>(given[i < n ? i : n - 1]);
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

AdminServer::AdminServer(AdminServerOptions options) : options_(std::move(options)) {
  static const unsigned init = mg_init_library(0);
  (void)init;
  if (options_.max_connections < 2) options_.max_connections = 2;
  if (options_.max_streams >= options_.max_connections) options_.max_streams = options_.max_connections - 1;
}

AdminServer::~AdminServer() { stop(); }

// Adds `r`, or replaces the route with the same method and pattern.
void AdminServer::add_route(std::shared_ptr<Route> r) {
  std::lock_guard lock(routes_mutex_);
  for (auto& existing : routes_) {
    if (existing->method == r->method && existing->segments == r->segments) {
      existing = std::move(r);
      return;
    }
  }
  routes_.push_back(std::move(r));
}

void AdminServer::route(std::string method, std::string pattern, Handler handler) {
  auto r = std::make_shared<Route>();
  r->method = std::move(method);
  r->segments = split_path(pattern);
  r->pattern = std::move(pattern);
  r->handler = std::move(handler);
  add_route(std::move(r));
}

void AdminServer::stream_route(std::string pattern, std::string content_type, StreamPrecheck precheck, StreamHandler handler) {
  auto r = std::make_shared<Route>();
  r->method = "GET";
  r->segments = split_path(pattern);
  r->pattern = std::move(pattern);
  r->streaming = true;
  r->content_type = std::move(content_type);
  r->precheck = std::move(precheck);
  r->stream = std::move(handler);
  add_route(std::move(r));
}

std::vector<AdminServer::RouteInfo> AdminServer::routes() const {
  std::lock_guard lock(routes_mutex_);
  std::vector<RouteInfo> out;
  for (const auto& r : routes_) out.push_back({r->method, r->pattern, r->streaming});
  return out;
}

std::shared_ptr<const AdminServer::Route> AdminServer::find(const std::string& method, const std::string& path,
                                                            std::map<std::string, std::string>& params,
                                                            bool* method_mismatch) const {
  auto segments = split_path(path);
  std::lock_guard lock(routes_mutex_);
  std::shared_ptr<const Route> best;
  int best_literals = -1;
  *method_mismatch = false;
  for (const auto& r : routes_) {
    if (r->segments.size() != segments.size()) continue;
    int literals = 0;
    bool match = true;
    for (size_t i = 0; i < segments.size() && match; ++i) {
      if (is_param(r->segments[i])) continue;
      if (r->segments[i] != segments[i]) match = false;
      else ++literals;
    }
    if (!match) continue;
    if (r->method != method && !(method == "HEAD" && r->method == "GET")) {
      *method_mismatch = true;
      continue;
    }
    if (literals > best_literals) {
      best = r;
      best_literals = literals;
    }
  }
  if (best) {
    params.clear();
    for (size_t i = 0; i < segments.size(); ++i) {
      const auto& s = best->segments[i];
      if (is_param(s)) params[s.substr(1, s.size() - 2)] = segments[i];
    }
    *method_mismatch = false;
  }
  return best;
}

bool AdminServer::authorized(const HttpRequest& request) const {
  if (options_.bearer_token.empty()) return true;
  std::string auth = request.header("authorization");
  constexpr std::string_view kPrefix = "Bearer ";
  if (auth.size() < kPrefix.size() || lower(auth.substr(0, kPrefix.size())) != lower(kPrefix)) return false;
  return constant_time_equal(std::string_view(auth).substr(kPrefix.size()), options_.bearer_token);
}

HttpResponse AdminServer::handle(HttpRequest request) const {
  HttpResponse response = dispatch(request);
  // A handler's 503 is an answer (/healthz, /readyz not ready), not a refusal; the server's own
  // 503s (stream limits) are noted where they are sent.
  if (response.status >= 400 && response.status < 500) note_refusal(request, response);
  return response;
}

void AdminServer::note_refusal(const HttpRequest& request, const HttpResponse& response) const {
  size_t index = std::size(kRefusalStatuses);
  for (size_t i = 0; i < std::size(kRefusalStatuses); ++i) {
    if (kRefusalStatuses[i] == response.status) index = i;
  }
  if (index == std::size(kRefusalStatuses)) return;
  g_refusals[index].fetch_add(1, std::memory_order_relaxed);

  uint64_t suppressed = 0;
  {
    std::lock_guard lock(g_refusal_log.mutex);
    auto now = std::chrono::steady_clock::now();
    if (now - g_refusal_log.window_start >= std::chrono::seconds(10)) {
      g_refusal_log.window_start = now;
      g_refusal_log.logged = 0;
      suppressed = std::exchange(g_refusal_log.suppressed, 0);
    }
    if (g_refusal_log.logged >= kRefusalLogBurst) {
      ++g_refusal_log.suppressed;
      return;
    }
    ++g_refusal_log.logged;
  }
  if (suppressed) spdlog::warn("admin: {} more refusals not logged (at most {} lines per 10 s)", suppressed, kRefusalLogBurst);
  std::string why;
  auto body = nlohmann::json::parse(response.body, nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_string()) why = body["error"].get<std::string>();
  // Not-found answers are part of normal use (ctl faults get NAME); the others say a client is
  // misconfigured or hostile.
  auto level = response.status == 404 ? spdlog::level::debug : spdlog::level::warn;
  spdlog::log(level, "admin: refused {} {} from {}: {} {}", printable(request.method), printable(request.path),
              request.remote.empty() ? std::string("(local)") : request.remote, response.status, printable(why));
}

HttpResponse AdminServer::dispatch(HttpRequest& request) const {
  if (!authorized(request)) return json_error(401, "missing or wrong bearer token");
  if (has_control_character(request.path)) return json_error(400, "the path has a control character or NUL");
  bool mismatch = false;
  auto r = find(request.method, request.path, request.path_params, &mismatch);
  if (!r) {
    if (mismatch) return json_error(405, "method " + request.method + " not allowed on " + request.path);
    return json_error(404, "no such endpoint: " + request.path);
  }
  if (r->streaming) return json_error(404, "streaming endpoint: " + request.path);
  if (json_too_deep(request.body)) return json_error(400, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  try {
    return r->handler(request);
  } catch (const std::exception& e) {
    spdlog::error("admin: {} {} failed: {}", request.method, request.path, e.what());
    return json_error(500, std::string("internal error: ") + e.what());
  }
}

std::string AdminServer::start() {
  if (context_) return "admin server already started";
  std::string error;
  std::string listen = civetweb_listen(options_.listen, &error);
  if (!error.empty()) return error;
  std::string threads = std::to_string(options_.max_connections);
  const char* civet_options[] = {
      "listening_ports", listen.c_str(),
      "num_threads", threads.c_str(),
      "enable_keep_alive", "no",
      "decode_url", "no",  // serve() decodes: civetweb's in-place decoding cuts a path at %00
      "request_timeout_ms", "30000",
      nullptr,
  };
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof callbacks);
  callbacks.log_message = [](const mg_connection*, const char* message) {
    spdlog::debug("admin http: {}", message);
    return 1;
  };
  mg_init_data init;
  std::memset(&init, 0, sizeof init);
  init.callbacks = &callbacks;
  init.user_data = this;
  init.configuration_options = civet_options;
  mg_error_data error_data;
  std::memset(&error_data, 0, sizeof error_data);
  char error_text[256] = {0};
  error_data.text = error_text;
  error_data.text_buffer_size = sizeof error_text;
  stopping_ = false;
  context_ = mg_start2(&init, &error_data);
  if (!context_) {
    return "admin listener " + options_.listen + ": " + (error_text[0] ? std::string(error_text) : std::string("cannot start"));
  }
  mg_set_request_handler(context_, "/", &AdminServer::on_request, this);
  mg_server_port ports[4];
  int n = mg_get_server_ports(context_, 4, ports);
  port_ = n > 0 ? static_cast<uint16_t>(ports[0].port) : 0;
  return "";
}

void AdminServer::stop() {
  if (!context_) return;
  stopping_ = true;
  mg_stop(context_);
  context_ = nullptr;
  port_ = 0;
}

int AdminServer::respond(mg_connection* conn, const HttpRequest& request, const HttpResponse& response) const {
  note_refusal(request, response);
  return send_response(conn, response);
}

int AdminServer::on_request(mg_connection* conn, void* self) {
  // civetweb's worker threads have small stacks (Debian's build): JSON, Prometheus serialisation
  // and logging overflow them. Each request is served on a thread with the default stack, while
  // the civetweb thread waits; admin traffic is light, so a thread per request is fine.
  int status = 500;
  std::thread serving([&] { status = static_cast<AdminServer*>(self)->serve(conn); });
  serving.join();
  return status;
}

int AdminServer::serve(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  HttpRequest request;
  request.method = info->request_method ? info->request_method : "";
  request.query = info->query_string ? info->query_string : "";
  request.remote = std::string(info->remote_addr) + ":" + std::to_string(info->remote_port);
  for (int i = 0; i < info->num_headers; ++i) request.headers[lower(info->http_headers[i].name)] = info->http_headers[i].value;
  // civetweb leaves the path encoded (decode_url: no); decoded here into a std::string, so a %00
  // stays in it (and is refused) instead of ending it.
  const std::string raw_path = info->local_uri ? info->local_uri : "/";
  if (!url_decode(raw_path, request.path, false)) {
    request.path = raw_path;
    return respond(conn, request, json_error(400, "malformed percent-escape in the path"));
  }
  if (std::count(request.path.begin(), request.path.end(), '/') != std::count(raw_path.begin(), raw_path.end(), '/')) {
    return respond(conn, request, json_error(400, "a path segment holds an encoded '/' (%2F)"));
  }

  if (!parse_query(request.query, request.query_params)) return respond(conn, request, json_error(400, "malformed query string"));

  // The token is checked before the body is read, so an anonymous client cannot make us buffer.
  if (!authorized(request)) return respond(conn, request, json_error(401, "missing or wrong bearer token"));
  if (info->content_length > 0 && static_cast<unsigned long long>(info->content_length) > options_.max_body_bytes) {
    return respond(conn, request, json_error(413, "request body over " + std::to_string(options_.max_body_bytes) + " bytes"));
  }
  char buffer[8192];
  for (;;) {
    int n = mg_read(conn, buffer, sizeof buffer);
    if (n <= 0) break;
    request.body.append(buffer, static_cast<size_t>(n));
    if (request.body.size() > options_.max_body_bytes) {
      return respond(conn, request, json_error(413, "request body over " + std::to_string(options_.max_body_bytes) + " bytes"));
    }
  }

  bool mismatch = false;
  auto r = has_control_character(request.path) ? nullptr : find(request.method, request.path, request.path_params, &mismatch);
  if (!r || !r->streaming) return send_response(conn, handle(std::move(request)));

  if (r->precheck) {
    HttpResponse pre = r->precheck(request);
    if (pre.status != 200) return respond(conn, request, pre);
  }
  unsigned open = open_streams_.fetch_add(1) + 1;
  if (open > options_.max_streams) {
    open_streams_.fetch_sub(1);
    return respond(conn, request, json_error(503, "too many streams open (limit " + std::to_string(options_.max_streams) + ")"));
  }
  mg_response_header_start(conn, 200);
  mg_response_header_add(conn, "Content-Type", r->content_type.c_str(), -1);
  mg_response_header_add(conn, "Transfer-Encoding", "chunked", -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  mg_response_header_send(conn);
  CivetStreamWriter writer(conn, stopping_);
  try {
    r->stream(request, writer);
  } catch (const std::exception& e) {
    spdlog::error("admin: stream {} failed: {}", request.path, e.what());
  }
  mg_send_chunk(conn, "", 0);
  open_streams_.fetch_sub(1);
  return 200;
}

}  // namespace kproxy::admin
