#include "proxy/observe/trace_exporter.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

namespace kproxy::observe {

namespace {

using Clock = std::chrono::steady_clock;

/// Milliseconds left until `deadline` (0 when passed), for poll().
int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 60'000));
}

/// Waits until `fd` is ready for `events` or the deadline passes; false on timeout or error.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int ms = remaining_ms(deadline);
    int n = ::poll(&p, 1, ms);
    if (n > 0) return true;
    if (n == 0) {
      if (ms == 0 || Clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) return false;
  }
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

nlohmann::json attribute_json(const SpanAttribute& a) {
  nlohmann::json value;
  if (const auto* s = std::get_if<std::string>(&a.value)) value["stringValue"] = *s;
  else value["intValue"] = std::to_string(std::get<int64_t>(a.value));  // int64: a string in protobuf's JSON mapping
  return {{"key", a.key}, {"value", std::move(value)}};
}

bool all_zero(const SpanId& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

std::string encode_otlp_json(const std::vector<Span>& spans, std::string_view service_name) {
  nlohmann::json out_spans = nlohmann::json::array();
  for (const Span& s : spans) {
    nlohmann::json j;
    j["traceId"] = to_hex(s.trace_id.data(), s.trace_id.size());
    j["spanId"] = to_hex(s.span_id.data(), s.span_id.size());
    if (!all_zero(s.parent_span_id)) j["parentSpanId"] = to_hex(s.parent_span_id.data(), s.parent_span_id.size());
    j["name"] = s.name;
    j["kind"] = 1;  // SPAN_KIND_INTERNAL
    j["startTimeUnixNano"] = std::to_string(s.start_unix_nano);
    j["endTimeUnixNano"] = std::to_string(s.end_unix_nano);
    nlohmann::json attributes = nlohmann::json::array();
    for (const auto& a : s.attributes) attributes.push_back(attribute_json(a));
    j["attributes"] = std::move(attributes);
    if (s.error) j["status"] = {{"code", 2}, {"message", s.status_message}};  // STATUS_CODE_ERROR
    else j["status"] = nlohmann::json::object();                              // STATUS_CODE_UNSET
    out_spans.push_back(std::move(j));
  }
  nlohmann::json resource = {{"attributes", nlohmann::json::array({attribute_json({"service.name", std::string(service_name)})})}};
  nlohmann::json scope = {{"scope", {{"name", "kproxy"}}}, {"spans", std::move(out_spans)}};
  nlohmann::json body = {{"resourceSpans", nlohmann::json::array({{{"resource", std::move(resource)},
                                                                   {"scopeSpans", nlohmann::json::array({std::move(scope)})}}})}};
  // Strings in spans come from the wire (transactional ids, rule names): never throw on bad UTF-8.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpPostResult http_post(const HttpTarget& target, std::string_view content_type, std::string_view body,
                         std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  HttpPostResult result;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(target.port);
  if (int rc = ::getaddrinfo(target.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    result.error = "cannot resolve " + target.host + ": " + ::gai_strerror(rc);
    return result;
  }
  int fd = -1;
  std::string connect_error = "no address";
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    int s = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) {
      connect_error = std::strerror(errno);
      continue;
    }
    int rc = ::connect(s, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!wait_for(s, POLLOUT, deadline)) {
        connect_error = "connect timed out";
        ::close(s);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      connect_error = std::strerror(errno);
      ::close(s);
      continue;
    }
    fd = s;
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    result.error = "cannot connect to " + target.host + ":" + port + ": " + connect_error;
    return result;
  }
  Fd guard(fd);

  const bool v6 = target.host.find(':') != std::string::npos;
  std::string request = "POST " + target.path + " HTTP/1.1\r\nHost: " + (v6 ? "[" + target.host + "]" : target.host) + ":" + port +
                        "\r\nContent-Type: " + std::string(content_type) + "\r\nContent-Length: " + std::to_string(body.size()) +
                        "\r\nConnection: close\r\nUser-Agent: kproxy\r\n\r\n";
  request.append(body);
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!wait_for(fd, POLLOUT, deadline)) {
        result.error = "send timed out";
        return result;
      }
    } else {
      result.error = std::string("send failed: ") + std::strerror(errno);
      return result;
    }
  }

  // The status line and headers; the body (OTLP's partial-success message) is not needed.
  std::string answer;
  char buf[4096];
  while (answer.find("\r\n\r\n") == std::string::npos && answer.size() < 65536) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      answer.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_for(fd, POLLIN, deadline)) {
        result.error = "no answer within " + std::to_string(timeout.count()) + " ms";
        return result;
      }
    } else {
      result.error = std::string("receive failed: ") + std::strerror(errno);
      return result;
    }
  }
  // "HTTP/1.1 200 OK"
  if (answer.size() < 12 || answer.compare(0, 5, "HTTP/") != 0 || answer[8] != ' ') {
    result.error = answer.empty() ? "the connection closed without an answer" : "not an HTTP answer";
    return result;
  }
  result.status = std::atoi(answer.substr(9, 3).c_str());
  if (result.status < 200 || result.status > 299) {
    size_t eol = answer.find("\r\n");
    result.error = "answered " + answer.substr(9, eol == std::string::npos ? 40 : std::min<size_t>(eol - 9, 80));
  }
  return result;
}

TraceExporter::TraceExporter(TraceExporterOptions options) : options_(std::move(options)) {
  if (!options_.post) options_.post = http_post;
  options_.batch_max_spans = std::max<size_t>(options_.batch_max_spans, 1);
}

TraceExporter::~TraceExporter() { stop(); }

void TraceExporter::start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { run(); });
}

bool TraceExporter::try_push(std::vector<Span>&& spans) {
  if (spans.empty()) return true;
  std::lock_guard lock(mutex_);
  if (stopping_) {
    dropped_shutdown_.fetch_add(spans.size(), std::memory_order_relaxed);
    return false;
  }
  if (queue_.size() + spans.size() > options_.max_queue_spans) {
    dropped_queue_full_.fetch_add(spans.size(), std::memory_order_relaxed);
    return false;
  }
  if (queue_.empty()) oldest_ = Clock::now();
  bool was_short = queue_.size() < options_.batch_max_spans;
  queue_.insert(queue_.end(), std::make_move_iterator(spans.begin()), std::make_move_iterator(spans.end()));
  if (was_short && queue_.size() >= options_.batch_max_spans) wake_.notify_one();
  return true;
}

void TraceExporter::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  if (!queue_.empty()) {  // never started, or the flush's deadline passed
    dropped_shutdown_.fetch_add(queue_.size(), std::memory_order_relaxed);
    queue_.clear();
  }
}

TraceExporterStats TraceExporter::stats() const {
  TraceExporterStats s;
  s.exported = exported_.load(std::memory_order_relaxed);
  s.dropped_queue_full = dropped_queue_full_.load(std::memory_order_relaxed);
  s.dropped_export_failed = dropped_export_failed_.load(std::memory_order_relaxed);
  s.dropped_shutdown = dropped_shutdown_.load(std::memory_order_relaxed);
  s.export_failures = export_failures_.load(std::memory_order_relaxed);
  s.batches = batches_.load(std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  s.queued = queue_.size();
  return s;
}

void TraceExporter::send(std::vector<Span>& batch, std::chrono::milliseconds timeout) {
  std::string body = encode_otlp_json(batch, options_.service_name);
  HttpPostResult r = options_.post(options_.target, "application/json", body, timeout);
  const bool failing_before = last_failed_;
  if (r.ok()) {
    exported_.fetch_add(batch.size(), std::memory_order_relaxed);
    batches_.fetch_add(1, std::memory_order_relaxed);
    if (failing_before) spdlog::info("tracing: the collector at {}:{} accepts spans again", options_.target.host, options_.target.port);
    last_failed_ = false;
  } else {
    export_failures_.fetch_add(1, std::memory_order_relaxed);
    dropped_export_failed_.fetch_add(batch.size(), std::memory_order_relaxed);
    // Once per run of failures: the metrics count every one.
    if (!last_failed_)
      spdlog::warn("tracing: {} spans dropped, the collector at {}:{}{} did not take them: {}", batch.size(), options_.target.host,
                   options_.target.port, options_.target.path, r.error);
    last_failed_ = true;
  }
  batch.clear();
}

void TraceExporter::run() {
  const auto interval = options_.batch_interval;
  auto next_tick = Clock::now() + interval;
  std::unique_lock lock(mutex_);
  auto take_batch = [&] {
    size_t n = std::min(queue_.size(), options_.batch_max_spans);
    std::vector<Span> batch(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
    oldest_ = Clock::now();  // what stays waits at most another interval
    return batch;
  };
  while (!stopping_) {
    auto now = Clock::now();
    if (queue_.size() >= options_.batch_max_spans || (!queue_.empty() && now >= oldest_ + interval)) {
      std::vector<Span> batch = take_batch();
      lock.unlock();
      send(batch, options_.timeout);
      lock.lock();
      continue;
    }
    if (now >= next_tick) {
      next_tick = now + interval;
      if (options_.tick) {
        lock.unlock();
        options_.tick();
        lock.lock();
        continue;
      }
    }
    auto wake_at = queue_.empty() ? next_tick : std::min(next_tick, oldest_ + interval);
    wake_.wait_until(lock, wake_at, [&] { return stopping_ || queue_.size() >= options_.batch_max_spans; });
  }
  // Stopping: what is queued goes out within the timeout; the rest is dropped by stop().
  const auto deadline = Clock::now() + options_.timeout;
  while (!queue_.empty()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    std::vector<Span> batch = take_batch();
    lock.unlock();
    send(batch, left);
    lock.lock();
  }
}

}  // namespace kproxy::observe
