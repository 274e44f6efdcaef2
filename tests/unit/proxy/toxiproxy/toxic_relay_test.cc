#include "proxy/toxiproxy/toxic_relay.h"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/support/http_exchange.h"

using namespace kproxy;
using namespace kproxy::toxiproxy;
using Clock = std::chrono::steady_clock;

namespace {

/// A TCP echo server on 127.0.0.1 (a port the kernel picks), one thread per connection, stopped
/// by its destructor.
class EchoServer {
 public:
  EchoServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        accepted_++;
        workers_.emplace_back([this, c] {
          char buf[65536];
          for (;;) {
            pollfd p{c, POLLIN, 0};
            if (stop_) break;
            if (::poll(&p, 1, 50) <= 0) continue;
            ssize_t n = ::recv(c, buf, sizeof(buf), 0);
            if (n <= 0) break;
            if (::send(c, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
          }
          ::close(c);
        });
      }
    });
  }
  ~EchoServer() {
    stop_ = true;
    thread_.join();
    for (auto& w : workers_) w.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
  std::vector<std::thread> workers_;
};

/// Reads exactly `n` bytes within `seconds`; what arrived (shorter on close, error or timeout).
/// `error` gets errno of a failed recv (ECONNRESET for a reset), 0 on a clean close.
std::string read_n(int fd, size_t n, int seconds, int* error = nullptr) {
  std::string out;
  auto deadline = Clock::now() + std::chrono::seconds(seconds);
  char buf[65536];
  while (out.size() < n && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    ssize_t got = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (got <= 0) {
      if (error) *error = got < 0 ? errno : 0;
      break;
    }
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

uint16_t port_of(const std::string& address) { return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))); }

ToxicSpec toxic(const char* type, Stream stream, std::initializer_list<std::pair<const char*, int64_t>> attributes) {
  ToxicSpec t;
  t.type = type;
  t.name = std::string(type) + "_" + std::string(stream_name(stream));
  t.stream = stream;
  for (auto [k, v] : attributes) t.attributes[k] = v;
  return t;
}

/// `fn` true within `seconds`.
template <typename F>
bool eventually(F fn, int seconds = 5) {
  auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < deadline) {
    if (fn()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fn();
}

}  // namespace

TEST_CASE("the relay passes bytes both ways, and closing the proxy closes its connections and port") {
  EchoServer echo;
  ToxicRelay relay;
  REQUIRE(relay.start() == "");
  auto host = relay.host();
  std::string bound;
  ApiError error;
  REQUIRE(host.open("echo", "127.0.0.1:0", "127.0.0.1:" + std::to_string(echo.port()), bound, error));
  int fd = testing::loopback_connect(port_of(bound));
  REQUIRE(fd >= 0);
  REQUIRE(::send(fd, "hello", 5, 0) == 5);
  CHECK(read_n(fd, 5, 5) == "hello");
  CHECK(relay.connections() == 1);
  CHECK(echo.accepted() == 1);

  // A second proxy on the same address is refused with 409.
  std::string other;
  CHECK_FALSE(host.open("again", bound, "127.0.0.1:1", other, error));
  CHECK(error.status == 409);

  host.close("echo");
  int closed_with = -1;
  CHECK(read_n(fd, 1, 5, &closed_with).empty());
  CHECK(relay.connections() == 0);
  ::close(fd);
  CHECK(testing::loopback_connect(port_of(bound)) < 0);  // nobody listens any more
  relay.stop();
}

TEST_CASE("latency delays what comes back; bandwidth paces it; removing them restores speed") {
  EchoServer echo;
  ToxicRelay relay;
  REQUIRE(relay.start() == "");
  auto host = relay.host();
  std::string bound;
  ApiError error;
  REQUIRE(host.open("echo", "127.0.0.1:0", "127.0.0.1:" + std::to_string(echo.port()), bound, error));
  host.toxics("echo", {toxic("latency", Stream::kDownstream, {{"latency", 300}, {"jitter", 0}})});
  int fd = testing::loopback_connect(port_of(bound));
  REQUIRE(fd >= 0);
  auto t0 = Clock::now();
  REQUIRE(::send(fd, "ping", 4, 0) == 4);
  CHECK(read_n(fd, 4, 5) == "ping");
  auto lag = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  CHECK(lag >= 290);

  // 100 KB/s: 50 000 bytes take about half a second.
  host.toxics("echo", {toxic("bandwidth", Stream::kDownstream, {{"rate", 100}})});
  std::string big(50000, 'x');
  t0 = Clock::now();
  REQUIRE(::send(fd, big.data(), big.size(), 0) == static_cast<ssize_t>(big.size()));
  CHECK(read_n(fd, big.size(), 10) == big);
  auto paced = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  CHECK(paced >= 400);

  host.toxics("echo", {});
  t0 = Clock::now();
  REQUIRE(::send(fd, "fast", 4, 0) == 4);
  CHECK(read_n(fd, 4, 5) == "fast");
  CHECK(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count() < 250);
  ::close(fd);
  relay.stop();
}

TEST_CASE("reset_peer resets the connection; timeout holds data until removed; limit_data closes") {
  EchoServer echo;
  ToxicRelay relay;
  REQUIRE(relay.start() == "");
  auto host = relay.host();
  std::string bound;
  ApiError error;
  REQUIRE(host.open("echo", "127.0.0.1:0", "127.0.0.1:" + std::to_string(echo.port()), bound, error));

  SUBCASE("reset_peer") {
    host.toxics("echo", {toxic("reset_peer", Stream::kDownstream, {{"timeout", 100}})});
    int fd = testing::loopback_connect(port_of(bound));
    REQUIRE(fd >= 0);
    int why = 0;
    CHECK(read_n(fd, 1, 5, &why).empty());
    CHECK(why == ECONNRESET);
    ::close(fd);
  }
  SUBCASE("timeout 0 holds the data until the toxic is removed") {
    host.toxics("echo", {toxic("timeout", Stream::kUpstream, {{"timeout", 0}})});
    int fd = testing::loopback_connect(port_of(bound));
    REQUIRE(fd >= 0);
    REQUIRE(::send(fd, "held", 4, 0) == 4);
    CHECK(read_n(fd, 4, 1).empty());
    host.toxics("echo", {});
    CHECK(read_n(fd, 4, 5) == "held");
    ::close(fd);
  }
  SUBCASE("limit_data passes its bytes, then closes") {
    host.toxics("echo", {toxic("limit_data", Stream::kDownstream, {{"bytes", 3}})});
    int fd = testing::loopback_connect(port_of(bound));
    REQUIRE(fd >= 0);
    REQUIRE(::send(fd, "abcdef", 6, 0) == 6);
    CHECK(read_n(fd, 6, 5) == "abc");
    ::close(fd);
  }
  SUBCASE("toxicity 0: the connection never has the toxic") {
    auto t = toxic("reset_peer", Stream::kDownstream, {{"timeout", 0}});
    t.toxicity = 0.0;
    host.toxics("echo", {t});
    int fd = testing::loopback_connect(port_of(bound));
    REQUIRE(fd >= 0);
    REQUIRE(::send(fd, "ok", 2, 0) == 2);
    CHECK(read_n(fd, 2, 5) == "ok");
    ::close(fd);
  }
  CHECK(eventually([&] { return relay.connections() == 0; }));
  relay.stop();
}

TEST_CASE("an upstream that refuses closes the client; a stopped relay refuses new proxies") {
  ToxicRelay relay;
  REQUIRE(relay.start() == "");
  auto host = relay.host();
  std::string bound;
  ApiError error;
  uint16_t dead = 0;
  {
    EchoServer gone;
    dead = gone.port();
  }
  REQUIRE(host.open("dead", "127.0.0.1:0", "127.0.0.1:" + std::to_string(dead), bound, error));
  int fd = testing::loopback_connect(port_of(bound));
  REQUIRE(fd >= 0);
  CHECK(read_n(fd, 1, 5).empty());
  ::close(fd);
  CHECK_FALSE(host.open("bad", "127.0.0.1:0", "no-port", bound, error));
  CHECK(error.status == 400);
  relay.stop();
  CHECK_FALSE(host.open("late", "127.0.0.1:0", "127.0.0.1:9", bound, error));
}

TEST_CASE("slicer cuts the data in pieces with a delay between them; slow_close delays passing a close on") {
  EchoServer echo;
  ToxicRelay relay;
  REQUIRE(relay.start() == "");
  auto host = relay.host();
  std::string bound;
  ApiError error;
  REQUIRE(host.open("echo", "127.0.0.1:0", "127.0.0.1:" + std::to_string(echo.port()), bound, error));

  SUBCASE("slicer: 1000 bytes in pieces of 100 +- 20, 20 ms apart, arrive whole and late") {
    host.toxics("echo", {toxic("slicer", Stream::kDownstream, {{"average_size", 100}, {"size_variation", 20}, {"delay", 20000}})});
    int fd = testing::loopback_connect(port_of(bound));
    REQUIRE(fd >= 0);
    std::string data;
    for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>('a' + i % 26));
    auto t0 = Clock::now();
    REQUIRE(::send(fd, data.data(), data.size(), 0) == static_cast<ssize_t>(data.size()));
    CHECK(read_n(fd, data.size(), 5) == data);
    // At least 1000 / 120 = 8 pieces: at least 7 gaps of 20 ms.
    CHECK(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count() >= 140);
    ::close(fd);
  }
  SUBCASE("slow_close: the client's close reaches the other side 300 ms late") {
    host.toxics("echo", {toxic("slow_close", Stream::kUpstream, {{"delay", 300}})});
    int fd = testing::loopback_connect(port_of(bound));
    REQUIRE(fd >= 0);
    REQUIRE(::send(fd, "x", 1, 0) == 1);
    REQUIRE(read_n(fd, 1, 5) == "x");
    REQUIRE(eventually([&] { return relay.connections() == 1; }));
    auto t0 = Clock::now();
    ::shutdown(fd, SHUT_WR);
    int why = -1;
    CHECK(read_n(fd, 1, 5, &why).empty());  // the relay closes the link once the delay is over
    CHECK(why == 0);
    CHECK(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count() >= 290);
    ::close(fd);
  }
  CHECK(eventually([&] { return relay.connections() == 0; }));
  relay.stop();
}
