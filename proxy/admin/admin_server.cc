#include "proxy/admin/admin_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <set>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "config/host_port.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/util/log_throttle.h"

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
    if (path[i] == '/') {
      ++i;
      continue;
    }
    size_t end = path.find('/', i);
    if (end == std::string_view::npos) end = path.size();
    segments.emplace_back(path.substr(i, end - i));
    i = end;
  }
  return segments;
}

bool is_param(const std::string& segment) { return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}'; }

/// Splits "host:port" / "[v6]:port" (config::parse_host_port, port 0 = any free port) into a
/// numeric host and a port ("localhost" is spelled out: the address is resolved numerically only).
bool split_listen(const std::string& listen, std::string& host, std::string& port, std::string* error) {
  std::string why;
  auto parsed = config::parse_host_port(listen, &why, /*allow_port_zero=*/true);
  if (!parsed) {
    *error = "bad admin listen address " + why;
    return false;
  }
  host = parsed->host == "localhost" ? "127.0.0.1" : parsed->host;
  port = std::to_string(parsed->port);
  return true;
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

std::vector<std::string> refusal_statuses() {
  std::vector<std::string> statuses;
  for (int status : kRefusalStatuses) statuses.push_back(std::to_string(status));
  return statuses;
}

/// Refusal log lines: at most kRefusalLogBurst per 10 s window, process-wide.
struct RefusalLogBudget {
  std::mutex mutex;
  std::chrono::steady_clock::time_point window_start{};
  unsigned logged = 0;
  uint64_t suppressed = 0;
};
RefusalLogBudget g_refusal_log;

using Clock = std::chrono::steady_clock;

/// Sends all of `data` on a blocking socket (SO_SNDTIMEO bounds each wait); false once the client
/// is gone or stalled.
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

/// The client's "addr:port" and "addr" ("[v6]:port" for IPv6).
void describe_peer(const sockaddr_storage& peer, std::string& remote, std::string& address) {
  char text[INET6_ADDRSTRLEN] = {0};
  uint16_t port = 0;
  if (peer.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&peer);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
    address = text;
    remote = "[" + address + "]:" + std::to_string(port);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&peer);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
    address = text;
    remote = address + ":" + std::to_string(port);
  }
}

class SocketStreamWriter final : public StreamWriter {
 public:
  SocketStreamWriter(int fd, const std::atomic<bool>& stopping) : fd_(fd), stopping_(stopping) {}
  bool write(std::string_view data) override {
    if (failed_) return false;
    if (data.empty()) return true;
    if (!send_all(fd_, chunk(data))) failed_ = true;
    return !failed_;
  }
  bool stopping() const override { return stopping_.load(std::memory_order_relaxed); }

 private:
  int fd_;
  const std::atomic<bool>& stopping_;
  bool failed_ = false;
};

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
  g_refusal_log.window_start = {};  // the next refusal opens a new window
  g_refusal_log.logged = 0;
  g_refusal_log.suppressed = 0;
}

uint64_t AdminServer::refusals(int status) const {
  for (size_t i = 0; i < std::size(kRefusalStatuses); ++i) {
    if (kRefusalStatuses[i] == status) return refusals_.value(i);
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

/// The server's sockets and threads: see the diagram in admin_server.h.
struct AdminServer::Network {
  /// A whole request waiting for a lane thread; the lane owns `fd`.
  struct Job {
    int fd = -1;
    HttpRequest request;
  };
  /// Threads and a bounded queue. Lane 0 serves every request but the probe paths; each probe
  /// path has a lane (one thread) of its own.
  struct Lane {
    std::string probe_path;  ///< "" for lane 0
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Job> jobs;
    bool stopping = false;
    std::vector<std::thread> threads;
  };
  /// A connection whose request is still arriving (or whose refusal is being lingered over).
  struct Pending {
    int fd = -1;
    std::string remote, address;
    Clock::time_point deadline;
    enum class Phase { head, body, linger } phase = Phase::head;
    std::string received;
    HttpRequest request;  ///< once admitted
    size_t body_bytes = 0;
    std::string method, target;  ///< for the log, once the head is parsed
    size_t discarded = 0;        ///< bytes read and dropped while lingering
  };

  AdminServer& server;
  std::vector<int> listeners;
  int wake[2] = {-1, -1};
  std::thread reader;
  std::vector<std::unique_ptr<Lane>> lanes;
  std::list<Pending> pending;  ///< oldest first

  explicit Network(AdminServer& s) : server(s) {}
  ~Network() {
    for (int fd : listeners) ::close(fd);
    for (auto& p : pending) ::close(p.fd);
    for (int fd : wake) {
      if (fd >= 0) ::close(fd);
    }
  }

  std::string listen(const std::string& where, uint16_t* port);
  void run_reader();
  void run_lane(Lane& lane);
  void accept_all(int listener);
  /// Reads what `p` sent; false once it is done with (closed or handed to a lane).
  bool on_readable(Pending& p);
  /// Best-effort answer from the reader thread (the socket is non-blocking; the response is
  /// small), then lingers so the client reads it before the close.
  void answer_now(Pending& p, const HttpResponse& response);
  /// Drops `p` (the oldest) to make room: 503 best effort, counted.
  void drop(Pending& p, const std::string& why);
  /// Hands a whole request to its lane; 503 from here when the lane's queue is full.
  bool enqueue(Pending& p);
  /// Wakes the reader's poll (stop, or a test that moved the clock).
  void poke();
  /// Now, on the server's clock (AdminServerOptions::clock).
  Clock::time_point now_time() const { return (server.options_.clock ? *server.options_.clock : util::steady_clock()).now(); }
  void stop();
};

std::string AdminServer::Network::listen(const std::string& where, uint16_t* port) {
  std::string host, service, error;
  if (!split_listen(where, host, service, &error)) return error;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return "admin listener " + where + ": bad address (" + ::gai_strerror(rc) + "; want a numeric host and port)";
  }
  std::string result;
  for (addrinfo* ai = found; ai && listeners.empty(); ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      result = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    // SO_REUSEADDR only (restart while old connections sit in TIME_WAIT); never SO_REUSEPORT, so
    // a second process cannot bind the admin port beside this one.
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      result = std::strerror(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    *port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    listeners.push_back(fd);
  }
  ::freeaddrinfo(found);
  if (listeners.empty()) return "admin listener " + where + ": " + (result.empty() ? std::string("cannot listen") : result);
  return "";
}

void AdminServer::Network::accept_all(int listener) {
  const auto& o = server.options_;
  // Bounded per wake-up, like the reads: the connections already in get their turn.
  for (int accepted = 0; accepted < 64; ++accepted) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // EMFILE and the like: the connection stays in the backlog; logged at most once a
        // minute (the reader polls again within a second).
        static util::LogThrottle throttle(std::chrono::minutes(1));
        if (uint64_t suppressed = 0; throttle.allow(&suppressed))
          spdlog::warn("admin: accept failed: {}{}", std::strerror(errno), util::LogThrottle::suppressed_note(suppressed));
      }
      return;
    }
    Pending p;
    p.fd = fd;
    describe_peer(peer, p.remote, p.address);
    p.deadline = now_time() + o.head_timeout;
    // Room is made by dropping the oldest connection still sending its request, from this
    // address first: the newest (a probe's, whose head arrives at once) always gets in.
    unsigned from_address = 0;
    for (const auto& q : pending) from_address += q.address == p.address;
    if (from_address >= o.max_pending_per_address) {
      for (auto it = pending.begin(); it != pending.end(); ++it) {
        if (it->address == p.address) {
          drop(*it, "more than " + std::to_string(o.max_pending_per_address) + " connections from " + p.address +
                        " still sending their request");
          pending.erase(it);
          break;
        }
      }
    }
    if (pending.size() >= o.max_pending) {
      drop(pending.front(), "more than " + std::to_string(o.max_pending) + " connections still sending their request");
      pending.pop_front();
    }
    pending.push_back(std::move(p));
  }
}

void AdminServer::Network::drop(Pending& p, const std::string& why) {
  if (p.phase != Pending::Phase::linger) {
    HttpResponse response = json_error(503, "admin API busy: " + why);
    std::string bytes = response_head(503, response.content_type, static_cast<long long>(response.body.size())) + response.body;
    (void)::send(p.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    server.note_dropped(p.remote, p.method, p.target, response);
  }
  ::close(p.fd);
}

void AdminServer::Network::answer_now(Pending& p, const HttpResponse& response) {
  server.note_dropped(p.remote, p.method, p.target, response);
  std::string bytes =
      response_head(response.status, response.content_type, static_cast<long long>(response.body.size()), response.allow) + response.body;
  (void)::send(p.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  // Closing with unread bytes from the client would reset the connection and could destroy the
  // response in flight: half-close, then read and discard for a moment.
  ::shutdown(p.fd, SHUT_WR);
  p.phase = Pending::Phase::linger;
  p.received.clear();
  p.deadline = now_time() + std::chrono::seconds(1);
}

bool AdminServer::Network::enqueue(Pending& p) {
  Lane* lane = lanes[0].get();
  if (p.request.method == "GET" || p.request.method == "HEAD") {
    for (auto& l : lanes) {
      if (!l->probe_path.empty() && l->probe_path == p.request.path) lane = l.get();
    }
  }
  {
    std::lock_guard lock(lane->mutex);
    if (lane->jobs.size() < server.options_.max_queued) {
      lane->jobs.push_back(Job{p.fd, std::move(p.request)});
      lane->ready.notify_one();
      return false;
    }
  }
  answer_now(p, json_error(503, "admin API busy: " + std::to_string(server.options_.max_queued) + " requests already waiting"));
  return true;
}

bool AdminServer::Network::on_readable(Pending& p) {
  char buffer[16384];
  // At most 64 KiB per wake-up: a client that sends fast must not keep the reader from the
  // others (a probe's head is waiting behind it).
  for (int reads = 0; reads < 4; ++reads) {
    ssize_t n = ::recv(p.fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) {
      // The client closed (or reset) before its request was whole: nothing to answer.
      ::close(p.fd);
      return false;
    }
    if (p.phase == Pending::Phase::linger) {
      p.discarded += static_cast<size_t>(n);
      if (p.discarded > (size_t{1} << 20)) {  // it keeps sending after its refusal: enough
        ::close(p.fd);
        return false;
      }
      continue;
    }
    p.received.append(buffer, static_cast<size_t>(n));
    if (p.phase == Pending::Phase::head) {
      HeadParse parsed = parse_request_head(p.received, kMaxHeadBytes);
      if (parsed.status == HeadParse::Status::incomplete) continue;
      if (parsed.status == HeadParse::Status::refused) {
        answer_now(p, json_error(parsed.refusal_status, parsed.refusal));
        continue;
      }
      p.method = parsed.head.method;
      p.target = parsed.head.target;
      Admission admission = server.admit(parsed.head, p.remote);
      if (admission.refused) {
        answer_now(p, admission.refusal);
        continue;
      }
      p.request = std::move(admission.request);
      p.body_bytes = admission.body_bytes;
      p.received.erase(0, parsed.head.head_bytes);
      p.phase = Pending::Phase::body;
      p.deadline = now_time() + server.options_.body_timeout;
      if (admission.expect_continue && p.received.size() < p.body_bytes) {
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        (void)::send(p.fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    }
    if (p.phase == Pending::Phase::body && p.received.size() >= p.body_bytes) {
      p.received.resize(p.body_bytes);  // bytes after the body are not read: the connection closes
      p.request.body = std::move(p.received);
      return enqueue(p);
    }
  }
  return true;
}

void AdminServer::Network::run_reader() {
  std::vector<pollfd> fds;
  std::vector<std::list<Pending>::iterator> owners;
  while (!server.stopping_.load()) {
    fds.clear();
    owners.clear();
    fds.push_back({wake[0], POLLIN, 0});
    for (int fd : listeners) fds.push_back({fd, POLLIN, 0});
    auto now = now_time();
    auto next = now + std::chrono::seconds(1);
    for (auto it = pending.begin(); it != pending.end(); ++it) {
      fds.push_back({it->fd, POLLIN, 0});
      owners.push_back(it);
      next = std::min(next, it->deadline);
    }
    int timeout = static_cast<int>(std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1));
    int ready = ::poll(fds.data(), fds.size(), timeout);
    if (ready < 0 && errno != EINTR) {
      spdlog::error("admin: poll failed: {}", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (fds[0].revents) {
      char drain[64];
      while (::read(wake[0], drain, sizeof drain) > 0) {
      }
    }
    const size_t first_pending = 1 + listeners.size();
    // Pending connections first: accepting may drop (erase) the oldest ones.
    for (size_t i = first_pending; i < fds.size(); ++i) {
      auto it = owners[i - first_pending];
      if (fds[i].revents && !on_readable(*it)) pending.erase(it);
    }
    for (size_t i = 1; i < first_pending; ++i) {
      if (fds[i].revents) accept_all(fds[i].fd);
    }
    now = now_time();
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      if (it->phase == Pending::Phase::linger) {
        ::close(it->fd);
        it = pending.erase(it);
        continue;
      }
      const bool head = it->phase == Pending::Phase::head;
      const auto limit = head ? server.options_.head_timeout : server.options_.body_timeout;
      answer_now(*it, json_error(408, std::string(head ? "request head" : "request body") + " not received within " +
                                          std::to_string(limit.count()) + " ms"));
      ++it;
    }
  }
}

void AdminServer::Network::run_lane(Lane& lane) {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(lane.mutex);
      lane.ready.wait(lock, [&] { return lane.stopping || !lane.jobs.empty(); });
      if (lane.stopping) return;
      job = std::move(lane.jobs.front());
      lane.jobs.pop_front();
    }
    // The lane writes with blocking sends; SO_SNDTIMEO bounds how long a client that does not
    // read can hold the thread.
    int flags = ::fcntl(job.fd, F_GETFL);
    ::fcntl(job.fd, F_SETFL, flags & ~O_NONBLOCK);
    const auto ms = server.options_.write_timeout.count();
    timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
    ::setsockopt(job.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    server.serve(job.fd, std::move(job.request));
  }
}

void AdminServer::Network::poke() {
  if (wake[1] >= 0) (void)!::write(wake[1], "x", 1);
}

void AdminServer::wake() {
  if (network_) network_->poke();
}

void AdminServer::Network::stop() {
  poke();
  if (reader.joinable()) reader.join();
  for (auto& lane : lanes) {
    {
      std::lock_guard lock(lane->mutex);
      lane->stopping = true;
    }
    lane->ready.notify_all();
  }
  for (auto& lane : lanes) {
    for (auto& t : lane->threads) t.join();
    for (auto& job : lane->jobs) ::close(job.fd);
    lane->jobs.clear();
  }
}

AdminServer::AdminServer(AdminServerOptions options)
    : options_(std::move(options)),
      refusals_("kproxy_admin_refusals_total",
                "Admin API requests refused, by HTTP status (400 invalid, 401 token, 404, 405, 408 request too slow, 409 clashes with "
                "what is installed, 411 no Content-Length, 413 body too large, 422 not applicable to the named APIs, 431 head too "
                "large, 503 busy).",
                "status", refusal_statuses()) {
  if (options_.max_pending_per_address == 0) options_.max_pending_per_address = 1;
  if (options_.max_pending < options_.max_pending_per_address) options_.max_pending = options_.max_pending_per_address;
  if (options_.max_queued == 0) options_.max_queued = 1;
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
                                                            std::map<std::string, std::string>& params, bool* method_mismatch,
                                                            std::string* allowed) const {
  auto segments = split_path(path);
  // The methods of the most specific patterns the path matches (GET/PUT/DELETE /faults/{name}
  // do not make /faults/reset, a literal path of its own, allow them).
  std::map<int, std::set<std::string>> methods;
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
      methods[literals].insert(r->method);
      if (r->method == "GET") methods[literals].insert("HEAD");
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
  } else if (*method_mismatch && allowed && !methods.empty()) {
    allowed->clear();
    for (const auto& m : methods.rbegin()->second) *allowed += (allowed->empty() ? "" : ", ") + m;
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
  refusals_.add(index);

  uint64_t suppressed = 0;
  {
    std::lock_guard lock(g_refusal_log.mutex);
    auto now = (options_.clock ? *options_.clock : util::steady_clock()).now();
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
  std::string allowed;
  auto r = find(request.method, request.path, request.path_params, &mismatch, &allowed);
  if (!r) {
    if (mismatch) {
      HttpResponse refused =
          json_error(405, "method " + request.method + " not allowed on " + request.path + " (allowed: " + allowed + ")");
      refused.allow = std::move(allowed);
      return refused;
    }
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

Admission AdminServer::admit(const RequestHead& head, std::string remote) const {
  Admission a;
  HttpRequest& request = a.request;
  request.method = head.method;
  request.remote = std::move(remote);
  for (const auto& [name, value] : head.headers) request.headers[name] = value;  // a repeated header keeps the last
  const size_t q = head.target.find('?');
  const std::string raw_path = head.target.substr(0, q);
  request.query = q == std::string::npos ? "" : head.target.substr(q + 1);
  auto refuse = [&](HttpResponse response) {
    a.refused = true;
    a.refusal = std::move(response);
    return a;
  };
  // Decoded into a std::string, so a %00 stays in the path (and is refused) instead of ending it.
  if (!url_decode(raw_path, request.path, false)) {
    request.path = raw_path;
    return refuse(json_error(400, "malformed percent-escape in the path"));
  }
  if (std::count(request.path.begin(), request.path.end(), '/') != std::count(raw_path.begin(), raw_path.end(), '/')) {
    return refuse(json_error(400, "a path segment holds an encoded '/' (%2F)"));
  }
  if (!parse_query(request.query, request.query_params)) return refuse(json_error(400, "malformed query string"));
  // The token is checked before the body is read, so an anonymous client cannot make us buffer.
  if (!authorized(request)) return refuse(json_error(401, "missing or wrong bearer token"));
  if (head.content_length > options_.max_body_bytes) {
    return refuse(json_error(413, "request body over " + std::to_string(options_.max_body_bytes) + " bytes"));
  }
  a.body_bytes = head.content_length;
  a.expect_continue = head.expect_continue;
  return a;
}

HttpResponse AdminServer::handle_message(std::string_view message, std::string remote) const {
  HeadParse parsed = parse_request_head(message, kMaxHeadBytes);
  HttpRequest noted;
  noted.remote = remote;
  auto refused = [&](HttpResponse response) {
    note_refusal(noted, response);
    return response;
  };
  if (parsed.status == HeadParse::Status::incomplete) {
    return refused(json_error(408, "request head not received within " + std::to_string(options_.head_timeout.count()) + " ms"));
  }
  if (parsed.status == HeadParse::Status::refused) return refused(json_error(parsed.refusal_status, parsed.refusal));
  noted.method = parsed.head.method;
  noted.path = parsed.head.target;
  Admission admission = admit(parsed.head, std::move(remote));
  if (admission.refused) return refused(admission.refusal);
  std::string_view body = message.substr(parsed.head.head_bytes);
  if (body.size() < admission.body_bytes) {
    return refused(json_error(408, "request body not received within " + std::to_string(options_.body_timeout.count()) + " ms"));
  }
  admission.request.body = std::string(body.substr(0, admission.body_bytes));
  return handle(std::move(admission.request));
}

void AdminServer::note_dropped(const std::string& remote, std::string_view method, std::string_view target,
                               const HttpResponse& response) const {
  HttpRequest request;
  request.remote = remote;
  request.method = method.empty() ? "-" : std::string(method);
  request.path = target.empty() ? "-" : std::string(target);
  note_refusal(request, response);
}

std::string AdminServer::start() {
  if (network_) return "admin server already started";
  stopping_ = false;
  auto network = std::make_unique<Network>(*this);
  uint16_t port = 0;
  if (std::string error = network->listen(options_.listen, &port); !error.empty()) return error;
  if (::pipe2(network->wake, O_NONBLOCK | O_CLOEXEC) != 0) return std::string("admin server: pipe: ") + std::strerror(errno);
  network->lanes.push_back(std::make_unique<Network::Lane>());
  for (const auto& path : options_.probe_paths) {
    network->lanes.push_back(std::make_unique<Network::Lane>());
    network->lanes.back()->probe_path = path;
  }
  // Threads with the default stack: JSON, Prometheus serialisation and logging need more than
  // the small stacks some HTTP libraries give their workers.
  Network* n = network.get();
  for (auto& lane : network->lanes) {
    const unsigned threads = lane->probe_path.empty() ? options_.max_connections : 1;
    for (unsigned i = 0; i < threads; ++i) lane->threads.emplace_back([n, l = lane.get()] { n->run_lane(*l); });
  }
  network->reader = std::thread([n] { n->run_reader(); });
  network_ = std::move(network);
  port_ = port;
  return "";
}

void AdminServer::stop() {
  if (!network_) return;
  stopping_ = true;
  network_->stop();
  network_.reset();
  port_ = 0;
}

void AdminServer::serve(int fd, HttpRequest request) {
  const bool head_only = request.method == "HEAD";
  auto send_response = [&](const HttpResponse& response) {
    std::string bytes = response_head(response.status, response.content_type, static_cast<long long>(response.body.size()), response.allow);
    if (!head_only) bytes += response.body;
    send_all(fd, bytes);
  };
  bool mismatch = false;
  std::map<std::string, std::string> params;
  auto r = has_control_character(request.path) ? nullptr : find(request.method, request.path, params, &mismatch);
  if (!r || !r->streaming) {
    send_response(handle(std::move(request)));
  } else {
    // admit() already checked the token.
    request.path_params = std::move(params);
    HttpResponse pre = r->precheck ? r->precheck(request) : HttpResponse{};
    if (pre.status != 200) {
      note_refusal(request, pre);
      send_response(pre);
    } else if (open_streams_.fetch_add(1) + 1 > options_.max_streams) {
      open_streams_.fetch_sub(1);
      HttpResponse busy = json_error(503, "too many streams open (limit " + std::to_string(options_.max_streams) + ")");
      note_refusal(request, busy);
      send_response(busy);
    } else {
      // The status line and headers go out before the handler runs (StreamHandler's contract).
      if (send_all(fd, response_head(200, r->content_type, -1))) {
        SocketStreamWriter writer(fd, stopping_);
        try {
          r->stream(request, writer);
        } catch (const std::exception& e) {
          spdlog::error("admin: stream {} failed: {}", request.path, e.what());
        }
        send_all(fd, chunk(""));
      }
      open_streams_.fetch_sub(1);
    }
  }
  // Unread bytes at close() would reset the connection (and could destroy the response in
  // flight): discard what has arrived, without waiting, since a lane thread must not be held by a
  // client that keeps its connection open.
  ::shutdown(fd, SHUT_WR);
  char discard[4096];
  for (int i = 0; i < 64 && ::recv(fd, discard, sizeof discard, MSG_DONTWAIT) > 0; ++i) {
  }
  ::close(fd);
}

}  // namespace kproxy::admin
