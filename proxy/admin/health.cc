#include "proxy/admin/health.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/generated/api_keys.h"
#include "codec/request_header.h"
#include "codec/writer.h"
#include "config/host_port.h"
#include "proxy/util/clock.h"

namespace kproxy::admin {
namespace {

using Clock = std::chrono::steady_clock;

/// Waits for `events` on `fd` until `deadline`; false on timeout or error.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - util::steady_clock().now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

std::string probe_kafka(const std::string& host_port, std::chrono::milliseconds timeout) {
  auto parsed = config::parse_host_port(host_port, nullptr);
  if (!parsed) return "bad address " + host_port;
  std::string host = parsed->host, port = std::to_string(parsed->port);
  auto deadline = util::steady_clock().now() + timeout;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) return "resolve " + host + ": " + gai_strerror(rc);
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    std::unique_ptr<int, void (*)(int*)> close_fd(&fd, [](int* f) { ::close(*f); });
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last_error = std::string("connect: ") + std::strerror(errno);
      continue;
    }
    if (!wait_fd(fd, POLLOUT, deadline)) {
      last_error = "connect timed out";
      continue;
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      last_error = std::string("connect: ") + std::strerror(err);
      continue;
    }
    // ApiVersions v0 (an empty body) behind request header v1, written by the codec.
    const int32_t correlation_id = 0x6b707278;
    codec::RequestHeader header;
    header.api_key = static_cast<int16_t>(codec::ApiKey::kApiVersions);
    header.api_version = 0;
    header.correlation_id = correlation_id;
    header.client_id = "kproxy-readyz";
    header.header_version = 1;
    std::vector<uint8_t> frame;
    codec::Writer w(frame);
    w.int32(static_cast<int32_t>(codec::request_header_size(header)));
    codec::write_request_header(w, header);
    size_t sent = 0;
    while (sent < frame.size()) {
      if (!wait_fd(fd, POLLOUT, deadline)) break;
      ssize_t n = ::send(fd, reinterpret_cast<const char*>(frame.data()) + sent, frame.size() - sent, MSG_NOSIGNAL);
      if (n <= 0 && errno != EAGAIN) break;
      if (n > 0) sent += static_cast<size_t>(n);
    }
    if (sent < frame.size()) {
      last_error = "send failed";
      continue;
    }
    char head[8];
    size_t got = 0;
    while (got < sizeof head) {
      if (!wait_fd(fd, POLLIN, deadline)) break;
      ssize_t n = ::recv(fd, head + got, sizeof head - got, 0);
      if (n == 0) break;
      if (n < 0 && errno != EAGAIN) break;
      if (n > 0) got += static_cast<size_t>(n);
    }
    if (got < sizeof head) {
      last_error = "no answer";
      continue;
    }
    uint32_t cid = 0;
    std::memcpy(&cid, head + 4, 4);
    if (static_cast<int32_t>(ntohl(cid)) != correlation_id) {
      last_error = "answer with a wrong correlation id";
      continue;
    }
    return "";
  }
  return last_error;
}

Health::Health(HealthHooks hooks, std::chrono::milliseconds ping_timeout, std::chrono::milliseconds probe_timeout)
    : hooks_(std::move(hooks)), ping_timeout_(ping_timeout), probe_timeout_(probe_timeout) {}

HealthReport Health::liveness() {
  size_t n = hooks_.worker_count ? hooks_.worker_count() : 0;
  struct Pongs {
    std::mutex mutex;
    std::condition_variable done;
    std::vector<bool> answered;
    size_t count = 0;
  };
  auto pongs = std::make_shared<Pongs>();
  pongs->answered.assign(n, false);
  auto start = util::steady_clock().now();
  for (size_t i = 0; i < n; ++i) {
    hooks_.post(i, [pongs, i] {
      std::lock_guard lock(pongs->mutex);
      if (!pongs->answered[i]) {
        pongs->answered[i] = true;
        ++pongs->count;
      }
      pongs->done.notify_all();
    });
  }
  std::unique_lock lock(pongs->mutex);
  pongs->done.wait_for(lock, ping_timeout_, [&] { return pongs->count == n; });
  nlohmann::json workers = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) workers.push_back({{"worker", i}, {"alive", static_cast<bool>(pongs->answered[i])}});
  bool ok = pongs->count == n && n > 0;
  auto ms = std::chrono::duration<double, std::milli>(util::steady_clock().now() - start).count();
  nlohmann::json body = {{"status", ok ? "ok" : "unhealthy"}, {"workers", workers}, {"ping_ms", ms}};
  return {ok, body.dump() + "\n"};
}

HealthReport Health::readiness() {
  auto upstreams = hooks_.upstreams ? hooks_.upstreams() : std::vector<std::string>{};
  bool draining = hooks_.draining && hooks_.draining();
  if (hooks_.started && !hooks_.started()) {
    nlohmann::json body = {{"status", "starting"}, {"draining", draining}, {"upstreams", nlohmann::json::array()}};
    return {false, body.dump() + "\n"};
  }
  nlohmann::json list = nlohmann::json::array();
  bool ok = !draining && !upstreams.empty();
  for (size_t i = 0; i < upstreams.size(); ++i) {
    bool answered;
    {
      std::lock_guard lock(mutex_);
      if (answered_.size() < upstreams.size()) answered_.resize(upstreams.size(), false);
      answered = answered_[i];
    }
    std::string error;
    if (!answered) {
      error = probe_kafka(upstreams[i], probe_timeout_);
      if (error.empty()) upstream_answered(i);
      answered = error.empty();
    }
    nlohmann::json entry = {{"upstream", upstreams[i]}, {"answered", answered}};
    if (!error.empty()) entry["error"] = error;
    list.push_back(entry);
    ok = ok && answered;
  }
  nlohmann::json body = {{"status", ok ? "ready" : "not ready"}, {"draining", draining}, {"upstreams", list}};
  return {ok, body.dump() + "\n"};
}

void Health::upstream_answered(size_t listener) {
  std::lock_guard lock(mutex_);
  if (answered_.size() <= listener) answered_.resize(listener + 1, false);
  answered_[listener] = true;
}

}  // namespace kproxy::admin
