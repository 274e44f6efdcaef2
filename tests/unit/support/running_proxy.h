// A Proxy for the runtime's unit tests (listener, worker): made from a one-listener config on
// reserved loopback ports (test_ports.h), with the test's own services; started or not. A started
// one is drained and joined when the test ends, and every worker loop must close cleanly.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "config/config_loader.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/runtime/proxy.h"
#include "tests/unit/support/services.h"
#include "tests/unit/support/test_ports.h"

namespace kproxy::testing {

/// A blocking socket listening on 127.0.0.1:`port` that never accepts: the kernel completes
/// connections to it (its backlog), which is all an upstream that must only be reachable needs.
/// Closed by the destructor.
struct SilentUpstream {
  uint16_t port = reserved_port();
  int fd = -1;
  SilentUpstream() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(::listen(fd, 64) == 0);
  }
  ~SilentUpstream() { ::close(fd); }
  SilentUpstream(const SilentUpstream&) = delete;
  SilentUpstream& operator=(const SilentUpstream&) = delete;
};

/// A blocking client socket connected to 127.0.0.1:`port` (receive timeout 5 s), or -1.
inline int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

/// Waits until `condition` holds, at most `timeout`; returns whether it held.
inline bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

/// Runs `read` on `worker`'s loop thread (Worker::post) and returns what it gave; nullopt when the
/// loop did not run it within 10 s.
template <class T>
std::optional<T> on_loop(runtime::Worker& worker, std::function<T()> read) {
  auto result = std::make_shared<std::promise<T>>();
  auto future = result->get_future();
  worker.post([result, read] { result->set_value(read()); });
  if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return std::nullopt;
  return future.get();
}

/// Connections `worker` serves now, read on its loop thread.
inline std::optional<size_t> connections_on(runtime::Worker& worker) {
  return on_loop<size_t>(worker, [&worker] { return worker.connection_count(); });
}

/// A Proxy with one listener "unit" on a reserved port in front of `upstream_port`, `workers`
/// workers and `extra` YAML. start() it or use it unstarted (its workers are then the test's own).
struct TestProxy {
  uint16_t port = reserved_port();
  uint16_t broker_base = reserved_port_block(4);
  TestServices services;
  std::shared_ptr<const config::Config> config;
  std::unique_ptr<runtime::Proxy> proxy;
  std::mutex mutex;
  std::condition_variable cv;
  bool stopped = false;
  bool started = false;

  explicit TestProxy(uint16_t upstream_port, unsigned workers = 1, const std::string& extra = "") {
    std::string yaml = "listeners:\n  - name: unit\n    listen: 127.0.0.1:" + std::to_string(port) +
                       "\n    upstream: 127.0.0.1:" + std::to_string(upstream_port) + "\n    broker_ports: " + std::to_string(broker_base) +
                       "\nworkers: " + std::to_string(workers) + "\nlog: { level: off }\n" + extra;
    auto loaded = config::load_config_string(yaml, "unit.yaml");
    REQUIRE_MESSAGE(loaded.ok(), loaded.error_text());
    config = loaded.config;
    proxy = std::make_unique<runtime::Proxy>(config, services.view());
    proxy->set_on_stopped([this] {
      std::lock_guard lock(mutex);
      stopped = true;
      cv.notify_all();
    });
  }
  void start() {
    REQUIRE(proxy->start() == "");
    started = true;
  }
  bool wait_stopped(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, timeout, [this] { return stopped; });
  }
  uint64_t count(metrics::ProxyEvent event) const { return services.metrics.total(event); }
  ~TestProxy() {
    if (started) {
      proxy->drain(std::chrono::milliseconds(0));
      CHECK(wait_stopped());
    }
    proxy.reset();  // joins the workers; each closes its loop
    CHECK(services.metrics.total(metrics::ProxyEvent::kLoopClosedUncleanly) == 0);
  }
  TestProxy(const TestProxy&) = delete;
  TestProxy& operator=(const TestProxy&) = delete;
};

}  // namespace kproxy::testing
