// Worker: its listening sockets, tasks posted to its loop thread, refusals past
// limits.max_connections, a listener closed under its connections, and the drain that ends its
// loop. Real libuv loops on loopback; every loop must close cleanly (~TestProxy checks).
#include "proxy/runtime/worker.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "proxy/runtime/proxy.h"
#include "tests/unit/support/running_proxy.h"

using namespace kproxy;
using namespace std::chrono_literals;

namespace {

/// True once the peer closed `fd` (EOF or reset) within the socket's receive timeout.
bool closed_by_peer(int fd) {
  char b;
  ssize_t n = ::recv(fd, &b, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

/// A started proxy (upstream: one that never answers) with one client connected and served by
/// worker 0; a TEST_CASE_FIXTURE's body sees `p`, `w` and `client` by name.
struct OneClient {
  kproxy::testing::SilentUpstream upstream;
  kproxy::testing::TestProxy p{upstream.port};
  runtime::Worker& w = (p.start(), p.proxy->worker(0));
  int client = kproxy::testing::connect_loopback(p.port);
  OneClient() {
    REQUIRE(client >= 0);
    REQUIRE(kproxy::testing::wait_until([&] { return kproxy::testing::connections_on(w) == size_t{1}; }));
  }
};

}  // namespace

TEST_CASE("worker: open_listener binds a port it then listens on; a bad address is reported and nothing is kept") {
  kproxy::testing::SilentUpstream upstream;
  kproxy::testing::TestProxy p(upstream.port);
  uint16_t port = kproxy::testing::reserved_port();
  uint16_t other = kproxy::testing::reserved_port();
  {
    runtime::Worker worker(*p.proxy, 0);  // never started: what open_listener made closes with it
    CHECK_FALSE(worker.listens_on(port));
    REQUIRE(worker.open_listener(connection::ListenerSpec{0, "unit", "127.0.0.1", port, -1, false}) == "");
    CHECK(worker.listens_on(port));
    CHECK(worker.listener_fd(port) >= 0);
    CHECK_FALSE(worker.listens_on(other));
    CHECK(worker.listener_fd(other) == -1);

    std::string error = worker.open_listener(connection::ListenerSpec{0, "unit", "not-an-ip", other, -1, false});
    CHECK(error.find("is not an IP address") != std::string::npos);
    CHECK_FALSE(worker.listens_on(other));

    // A second worker listens on the same socket.
    runtime::Worker second(*p.proxy, 1);
    REQUIRE(second.open_listener(connection::ListenerSpec{0, "unit", "127.0.0.1", port, -1, false}, worker.listener_fd(port)) == "");
    CHECK(second.listens_on(port));
    CHECK_FALSE(worker.draining());
  }
}

TEST_CASE("worker: a posted task runs on the worker's own loop thread, named after the worker") {
  kproxy::testing::SilentUpstream upstream;
  kproxy::testing::TestProxy p(upstream.port, /*workers=*/2);
  p.start();
  for (size_t i = 0; i < 2; ++i) {
    runtime::Worker& w = p.proxy->worker(i);
    CHECK(w.index() == i);
    auto name = kproxy::testing::on_loop<std::string>(w, [] {
      char buf[16] = {};
      pthread_getname_np(pthread_self(), buf, sizeof buf);
      return std::string(buf);
    });
    CHECK(name == "kproxy-w" + std::to_string(i));
    auto thread = kproxy::testing::on_loop<std::thread::id>(w, [] { return std::this_thread::get_id(); });
    REQUIRE(thread.has_value());
    CHECK(*thread != std::this_thread::get_id());
  }
}

TEST_CASE("worker: past limits.max_connections a client is accepted and closed at once, and counted as refused") {
  kproxy::testing::SilentUpstream upstream;
  kproxy::testing::TestProxy p(upstream.port, 1, "limits: { max_connections: 1 }\n");
  p.start();
  int first = kproxy::testing::connect_loopback(p.port);
  REQUIRE(first >= 0);
  REQUIRE(kproxy::testing::wait_until([&] { return p.count(metrics::ProxyEvent::kConnectionAccepted) == 1; }));
  auto refused_before = p.count(metrics::ProxyEvent::kConnectionRefused);

  int second = kproxy::testing::connect_loopback(p.port);
  REQUIRE(second >= 0);
  CHECK(closed_by_peer(second));
  CHECK(p.count(metrics::ProxyEvent::kConnectionRefused) == refused_before + 1);
  CHECK(p.count(metrics::ProxyEvent::kConnectionAccepted) == 1);
  CHECK(kproxy::testing::connections_on(p.proxy->worker(0)) == size_t{1});
  ::close(second);

  // The slot comes back when the first client goes.
  ::close(first);
  REQUIRE(kproxy::testing::wait_until([&] { return kproxy::testing::connections_on(p.proxy->worker(0)) == size_t{0}; }));
  int third = kproxy::testing::connect_loopback(p.port);
  REQUIRE(third >= 0);
  CHECK(kproxy::testing::wait_until([&] { return p.count(metrics::ProxyEvent::kConnectionAccepted) == 2; }));
  ::close(third);
}

TEST_CASE_FIXTURE(OneClient, "worker: close_listener stops listening and closes that listener's connections") {
  auto listening = kproxy::testing::on_loop<bool>(w, [&worker = w, port = p.port] {
    worker.close_listener(0, 0ms);
    return worker.listens_on(port);
  });
  CHECK(listening == false);
  CHECK(closed_by_peer(client));
  CHECK(kproxy::testing::wait_until([&] { return kproxy::testing::connections_on(w) == size_t{0}; }));
  ::close(client);
  CHECK(kproxy::testing::connect_loopback(p.port) == -1);  // nothing listens there any more
  CHECK_FALSE(w.draining());
}

TEST_CASE_FIXTURE(OneClient, "worker: a drain stops accepting, closes its connections at the deadline and ends the loop") {
  CHECK_FALSE(w.draining());

  w.post([&worker = w] { worker.begin_drain(0ms); });
  CHECK(kproxy::testing::wait_until([&] { return w.draining(); }));
  CHECK(closed_by_peer(client));  // an idle connection has nothing in flight: closed
  CHECK(p.wait_stopped());        // the only worker's loop ended: the proxy says it stopped
  CHECK(kproxy::testing::connect_loopback(p.port) == -1);
  ::close(client);

  std::atomic<bool> ran{false};
  w.post([&ran] { ran = true; });  // the loop has ended: dropped, not queued for ever
  CHECK_FALSE(ran.load());
}
