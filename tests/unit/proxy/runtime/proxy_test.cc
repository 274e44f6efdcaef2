// The whole proxy in one process: kproxy's workers in front of a scripted fake broker (blocking
// sockets on threads), driven by a blocking test client. Covers forwarding, pipelining, acks=0,
// unknown API keys, the address rewrite and per-broker ports, correlation mismatches, upstream
// failures and drain. Every worker loop must close cleanly (uv_loop_close == 0).
#include "proxy/runtime/proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/response_header.h"
#include "config/config_loader.h"
#include "proxy/metrics/proxy_metrics.h"
#include "tests/unit/support/services.h"
#include "tests/unit/support/test_ports.h"

using namespace kproxy;
using namespace std::chrono_literals;

namespace {

int listen_socket(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(::listen(fd, 16) == 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

/// A port nothing listens on yet, reserved for this test run (tests/unit/support/test_ports.h).
uint16_t free_port() { return testing::reserved_port(); }

int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      timeval tv{5, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      return fd;
    }
    std::this_thread::sleep_for(20ms);
  }
  FAIL("cannot connect to port ", port);
  return -1;
}

bool read_exact(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t got = ::recv(fd, p, n, 0);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

void write_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

/// One frame without its size prefix; nullopt on EOF/timeout.
std::optional<std::vector<uint8_t>> read_frame(int fd) {
  uint8_t size_bytes[4];
  if (!read_exact(fd, size_bytes, 4)) return std::nullopt;
  int32_t size = codec::peek_response_correlation_id(codec::Bytes(size_bytes, 4));
  std::vector<uint8_t> out(static_cast<size_t>(size));
  if (size > 0 && !read_exact(fd, out.data(), out.size())) return std::nullopt;
  return out;
}

bool closed_by_peer(int fd) {
  uint8_t b;
  return ::recv(fd, &b, 1, 0) == 0;
}

std::vector<uint8_t> request(int16_t key, int16_t version, int32_t cid, const std::vector<uint8_t>& body = {}) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  w.int32(0);
  w.int16(key);
  w.int16(version);
  w.int32(cid);
  w.nullable_string(std::string_view("unit"), false);
  if (codec::request_header_version(key, version) == 2) w.uvarint(0);
  w.raw(codec::Bytes(body));
  w.patch_int32(0, static_cast<int32_t>(out.size() - 4));
  return out;
}

int32_t cid_of(const std::vector<uint8_t>& response) { return codec::peek_response_correlation_id(codec::Bytes(response)); }

/// A scripted broker on its own threads. Every request gets a response "cid + 'ok' + api key",
/// except: Metadata (a real MetadataResponse naming node 1 at this broker), Produce acks=0
/// (nothing), api key 998 (wrong correlation id), 997 (answered after 300 ms), 996 (a 64 KiB
/// response).
class FakeBroker {
 public:
  FakeBroker() {
    fd_ = listen_socket(&port_);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FakeBroker() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    acceptor_.join();
    for (auto& t : connections_) t.join();
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_; }
  size_t bytes_sent() const { return bytes_sent_; }

 private:
  void accept_loop() {
    while (!stopping_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++accepted_;
      connections_.emplace_back([this, c] { serve(c); });
    }
  }
  void serve(int c) {
    while (auto frame = read_frame(c)) {
      codec::Bytes f(*frame);
      auto key = static_cast<int16_t>((f[0] << 8) | f[1]);
      auto version = static_cast<int16_t>((f[2] << 8) | f[3]);
      int32_t cid = codec::peek_response_correlation_id(f.subspan(4));
      std::vector<uint8_t> out;
      codec::Writer w(out);
      w.int32(0);
      if (key == 3) {
        codec::ResponseHeader h;
        h.correlation_id = cid;
        h.header_version = codec::response_header_version(key, version);
        codec::write_response_header(w, h);
        codec::MetadataResponse m;
        m.brokers.resize(1);
        m.brokers[0].node_id = 1;
        m.brokers[0].host = "127.0.0.1";
        m.brokers[0].port = port_;
        m.write(w, version);
      } else if (key == 0) {
        continue;  // the tests send Produce only with acks=0
      } else {
        w.int32(key == 998 ? cid + 1 : cid);
        w.raw(std::string_view("ok"));
        w.int16(key);
        if (key == 997) std::this_thread::sleep_for(300ms);
        if (key == 996) out.resize(out.size() + (64 << 10), 0x42);
      }
      w.patch_int32(0, static_cast<int32_t>(out.size() - 4));
      write_all(c, out);
      bytes_sent_ += out.size();
    }
    ::close(c);
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::atomic<size_t> bytes_sent_{0};
  std::thread acceptor_;
  std::vector<std::thread> connections_;
};

/// A running Proxy in front of `upstream_port`; stops it (drain) and checks a clean shutdown.
struct RunningProxy {
  uint16_t port = free_port();
  uint16_t base = testing::reserved_port_block(9);  // broker_ports: node N at base + N
  testing::TestServices services;
  std::unique_ptr<runtime::Proxy> proxy;
  std::mutex mutex;
  std::condition_variable cv;
  bool stopped = false;

  /// `kernel_ports`: listen on port 0 and `broker_ports: 0` (the kernel picks; `port` is read back).
  explicit RunningProxy(uint16_t upstream_port, const std::string& extra = "", bool kernel_ports = false) {
    if (kernel_ports) port = base = 0;
    std::string yaml = "listeners:\n  - name: unit\n    listen: 127.0.0.1:" + std::to_string(port) +
                       "\n    upstream: 127.0.0.1:" + std::to_string(upstream_port) + "\n    broker_ports: " + std::to_string(base) +
                       "\nworkers: 2\nlog: { level: off }\n" + extra;
    auto loaded = config::load_config_string(yaml, "unit.yaml");
    REQUIRE_MESSAGE(loaded.ok(), loaded.error_text());
    proxy = std::make_unique<runtime::Proxy>(loaded.config, services.view());
    proxy->set_on_stopped([this] {
      std::lock_guard lock(mutex);
      stopped = true;
      cv.notify_all();
    });
    CHECK(proxy->listener_port(0) == 0);  // not bound before start()
    REQUIRE(proxy->start() == "");
    if (kernel_ports) port = proxy->listener_port(0);
  }
  void drain(std::chrono::milliseconds deadline) { proxy->drain(deadline); }
  bool wait_stopped(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, timeout, [this] { return stopped; });
  }
  ~RunningProxy() {
    auto unclean_before = services.metrics.total(metrics::ProxyEvent::kLoopClosedUncleanly);
    drain(0ms);
    CHECK(wait_stopped(5s));
    proxy.reset();  // joins the workers; each closes its loop
    CHECK(services.metrics.total(metrics::ProxyEvent::kLoopClosedUncleanly) == unclean_before);
  }
};

}  // namespace

TEST_CASE("pipelined requests, acks=0 and unknown API keys are forwarded in order, bytes untouched") {
  FakeBroker broker;
  RunningProxy kp(broker.port());
  int c = connect_to(kp.port);
  auto unknown_before = kp.services.metrics.total(metrics::ProxyEvent::kRequestUnknownVersion);
  std::vector<uint8_t> batch;
  std::vector<int32_t> expected;
  for (int i = 0; i < 30; ++i) {
    int32_t cid = i % 2 ? INT32_MAX - i : -i;  // ids near INT32_MAX and negative ones are legal
    std::vector<uint8_t> r;
    if (i % 5 == 0) {
      // Produce v3 with acks=0: no response and no FIFO entry.
      std::vector<uint8_t> body;
      codec::Writer w(body);
      w.nullable_string(std::nullopt, false);
      w.int16(0);
      w.int32(1000);
      w.int32(0);
      r = request(0, 3, cid, body);
    } else {
      r = request(i % 3 ? 18 : 999, 0, cid);
      expected.push_back(cid);
    }
    batch.insert(batch.end(), r.begin(), r.end());
  }
  write_all(c, batch);
  for (int32_t cid : expected) {
    auto response = read_frame(c);
    REQUIRE(response.has_value());
    CHECK(cid_of(*response) == cid);
    CHECK(std::string(response->begin() + 4, response->begin() + 6) == "ok");
  }
  CHECK(kp.services.metrics.total(metrics::ProxyEvent::kRequestUnknownVersion) - unknown_before == 8);  // i = 3, 6, 9, 12, 18, 21, 24, 27
  ::close(c);
}

TEST_CASE("Metadata names the kproxy port, which leads to the real broker") {
  FakeBroker broker;
  RunningProxy kp(broker.port());
  int c = connect_to(kp.port);
  for (int16_t version : {int16_t{4}, int16_t{12}}) {
    std::vector<uint8_t> body;
    codec::Writer w(body);
    codec::MetadataRequest req;
    req.write(w, version);
    write_all(c, request(3, version, 42, body));
    auto response = read_frame(c);
    REQUIRE(response.has_value());
    codec::Bytes message(*response);
    codec::ResponseHeader h;
    REQUIRE(codec::read_response_header(message, codec::response_header_version(3, version), h, nullptr));
    CHECK(h.correlation_id == 42);
    codec::MetadataResponse m;
    codec::Reader r(message.subspan(h.size));
    m.read(r, version);
    REQUIRE(r.ok());
    REQUIRE(m.brokers.size() == 1);
    CHECK(m.brokers[0].host == "127.0.0.1");
    CHECK(m.brokers[0].port == kp.base + 1);
  }
  ::close(c);
  // The per-broker port is open on the discovering worker at once and goes to the real broker.
  int before = broker.accepted();
  int b = connect_to(static_cast<uint16_t>(kp.base + 1));
  write_all(b, request(18, 0, 7));
  auto response = read_frame(b);
  REQUIRE(response.has_value());
  CHECK(cid_of(*response) == 7);
  CHECK(broker.accepted() == before + 1);
  ::close(b);
}

TEST_CASE("port 0: the kernel picks the bootstrap port and each broker's port, and kproxy reports them (issue #30 item 7)") {
  FakeBroker broker;
  RunningProxy kp(broker.port(), "", /*kernel_ports=*/true);
  REQUIRE(kp.port != 0);
  CHECK(kp.proxy->directory(0).routes().empty());  // no broker named yet: no broker port
  int c = connect_to(kp.port);
  std::vector<uint8_t> body;
  codec::Writer w(body);
  codec::MetadataRequest req;
  req.write(w, 12);
  write_all(c, request(3, 12, 5, body));
  auto response = read_frame(c);
  REQUIRE(response.has_value());
  codec::Bytes message(*response);
  codec::ResponseHeader h;
  REQUIRE(codec::read_response_header(message, codec::response_header_version(3, 12), h, nullptr));
  codec::MetadataResponse m;
  codec::Reader r(message.subspan(h.size));
  m.read(r, 12);
  REQUIRE(r.ok());
  REQUIRE(m.brokers.size() == 1);
  ::close(c);
  // The port handed to the client is the one the directory bound and now listens on.
  auto routes = kp.proxy->directory(0).routes();
  REQUIRE(routes.size() == 1);
  CHECK(routes[0].node_id == 1);
  CHECK(routes[0].listening);
  CHECK(routes[0].proxy_port != 0);
  CHECK(routes[0].proxy_port != kp.port);
  CHECK(m.brokers[0].port == routes[0].proxy_port);
  int before = broker.accepted();
  int b = connect_to(routes[0].proxy_port);
  write_all(b, request(18, 0, 9));
  auto answer = read_frame(b);
  REQUIRE(answer.has_value());
  CHECK(cid_of(*answer) == 9);
  CHECK(broker.accepted() == before + 1);
  ::close(b);
}

TEST_CASE("a correlation id mismatch closes the connection") {
  FakeBroker broker;
  RunningProxy kp(broker.port());
  auto before = kp.services.metrics.total(metrics::ProxyEvent::kCorrelationMismatch);
  int c = connect_to(kp.port);
  write_all(c, request(998, 0, 5));
  CHECK(closed_by_peer(c));
  CHECK(kp.services.metrics.total(metrics::ProxyEvent::kCorrelationMismatch) == before + 1);
  ::close(c);
}

TEST_CASE("an unreachable upstream closes the client promptly") {
  RunningProxy kp(free_port());
  auto before = kp.services.metrics.total(metrics::ProxyEvent::kUpstreamConnectFailure);
  int c = connect_to(kp.port);
  auto t0 = std::chrono::steady_clock::now();
  write_all(c, request(18, 0, 1));
  CHECK(closed_by_peer(c));
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK(kp.services.metrics.total(metrics::ProxyEvent::kUpstreamConnectFailure) == before + 1);
  ::close(c);
}

TEST_CASE("framing errors close only that connection") {
  FakeBroker broker;
  RunningProxy kp(broker.port(), "limits: { max_request_frame_bytes: 1KiB }\n");
  int bad = connect_to(kp.port);
  write_all(bad, {0x00, 0x00, 0x08, 0x00});  // 2048 > 1 KiB
  CHECK(closed_by_peer(bad));
  ::close(bad);
  int tls = connect_to(kp.port);
  auto before = kp.services.metrics.total(metrics::ProxyEvent::kTlsOnPlaintext);
  write_all(tls, {0x16, 0x03, 0x01, 0x02, 0x00, 0x01});
  CHECK(closed_by_peer(tls));
  CHECK(kp.services.metrics.total(metrics::ProxyEvent::kTlsOnPlaintext) == before + 1);
  ::close(tls);
  int good = connect_to(kp.port);
  write_all(good, request(18, 0, 3));
  auto response = read_frame(good);
  REQUIRE(response.has_value());
  CHECK(cid_of(*response) == 3);
  ::close(good);
}

TEST_CASE("drain lets an in-flight request finish, then closes") {
  FakeBroker broker;
  RunningProxy kp(broker.port());
  int c = connect_to(kp.port);
  write_all(c, request(997, 0, 11));  // answered after 300 ms
  std::this_thread::sleep_for(100ms);
  kp.drain(5s);
  auto response = read_frame(c);
  REQUIRE(response.has_value());
  CHECK(cid_of(*response) == 11);
  CHECK(closed_by_peer(c));
  CHECK(kp.wait_stopped(5s));
  ::close(c);
}

TEST_CASE("reload refuses listener changes and accepts the rest") {
  FakeBroker broker;
  RunningProxy kp(broker.port());
  auto current = kp.proxy->config();
  auto changed = std::make_shared<config::Config>(*current);
  changed->listeners[0].listen.port = static_cast<uint16_t>(changed->listeners[0].listen.port + 1);
  CHECK(kp.proxy->reload(changed).find("restart") != std::string::npos);
  CHECK(kp.proxy->config() == current);
  auto limits = std::make_shared<config::Config>(*current);
  limits->limits.max_connections = 3;
  CHECK(kp.proxy->reload(limits) == "");
  CHECK(kp.proxy->config()->limits.max_connections == 3);
}

TEST_CASE("an unreachable bootstrap server sends later connections to the next one") {
  FakeBroker broker;
  uint16_t dead = free_port();
  uint16_t port = free_port();
  std::string yaml = "listeners:\n  - name: unit\n    listen: 127.0.0.1:" + std::to_string(port) +
                     "\n    upstream: 127.0.0.1:" + std::to_string(dead) + ",127.0.0.1:" + std::to_string(broker.port()) +
                     "\n    broker_ports: " + std::to_string(free_port()) + "\nworkers: 1\nlog: { level: off }\n";
  auto loaded = config::load_config_string(yaml, "unit.yaml");
  REQUIRE_MESSAGE(loaded.ok(), loaded.error_text());
  testing::TestServices services;
  runtime::Proxy p(loaded.config, services.view());
  REQUIRE(p.start() == "");
  int first = connect_to(port);
  write_all(first, request(18, 0, 1));
  CHECK(closed_by_peer(first));  // the first bootstrap is down: this client is closed promptly
  ::close(first);
  int second = connect_to(port);
  write_all(second, request(18, 0, 2));
  auto response = read_frame(second);
  REQUIRE(response.has_value());
  CHECK(cid_of(*response) == 2);
  ::close(second);
  p.drain(0ms);
  p.join();
}

TEST_CASE("backpressure: a client that does not read stops kproxy reading the broker") {
  FakeBroker broker;
  RunningProxy kp(broker.port());
  int c = connect_to(kp.port);
  constexpr int kRequests = 2000;  // 2000 x 64 KiB = 125 MiB of responses
  std::vector<uint8_t> batch;
  for (int i = 0; i < kRequests; ++i) {
    auto r = request(996, 0, i);
    batch.insert(batch.end(), r.begin(), r.end());
  }
  write_all(c, batch);
  std::this_thread::sleep_for(1500ms);
  // Kernel socket buffers on both sides plus kproxy's bounded queue: far less than everything.
  size_t stalled_at = broker.bytes_sent();
  MESSAGE("the broker got ", stalled_at >> 20, " MiB out before kproxy stopped reading it");
  CHECK(stalled_at < (48u << 20));
  // Reading resumes the flow; every response arrives, in order.
  for (int i = 0; i < kRequests; ++i) {
    auto response = read_frame(c);
    REQUIRE(response.has_value());
    REQUIRE(cid_of(*response) == i);
    CHECK(response->size() == 4 + 2 + 2 + (64 << 10));
  }
  CHECK(broker.bytes_sent() == size_t{kRequests} * (4 + 4 + 2 + 2 + (64 << 10)));
  ::close(c);
}

TEST_CASE("backpressure: bytes a fault rule holds for the client stop kproxy reading the broker") {
  // The first response is held for about a second: slowed to 64 KiB/s (1 s for its 64 KiB) or
  // delayed 1 s; the 399 after it wait behind it, in order. Without counting them, kproxy would
  // read all 25 MiB from the broker at once.
  const char* rule = "";
  SUBCASE("bandwidth") { rule = R"({"action":{"bandwidth":65536},"trigger":{"once":true}})"; }
  SUBCASE("delay") { rule = R"({"action":{"delay":1000,"side":"response"},"trigger":{"once":true}})"; }
  INFO(rule);
  FakeBroker broker;
  RunningProxy kp(broker.port());
  REQUIRE(kp.proxy->live_rules().put_rule("hold-first", nlohmann::json::parse(rule)) == "");
  int c = connect_to(kp.port);
  constexpr int kRequests = 400;  // 400 x 64 KiB = 25 MiB of responses
  std::vector<uint8_t> batch;
  for (int i = 0; i < kRequests; ++i) {
    auto r = request(996, 0, i);
    batch.insert(batch.end(), r.begin(), r.end());
  }
  write_all(c, batch);
  std::atomic<int> received{0};
  std::atomic<bool> in_order{true};
  std::thread reader([&] {
    for (int i = 0; i < kRequests; ++i) {
      auto response = read_frame(c);
      if (!response || cid_of(*response) != i || response->size() != 4 + 2 + 2 + (64 << 10)) {
        in_order = false;
        return;
      }
      ++received;
    }
  });
  std::this_thread::sleep_for(600ms);  // the first response is still being released
  size_t stalled_at = broker.bytes_sent();
  MESSAGE("the broker got ", stalled_at >> 10, " KiB out while a rule held the first response (", received.load(), " received)");
  CHECK(received.load() == 0);
  // The high-water mark (1 MiB plus one read) plus the upstream socket's kernel buffers.
  CHECK(stalled_at < (12u << 20));
  reader.join();
  CHECK(in_order.load());
  CHECK(received.load() == kRequests);
  CHECK(broker.bytes_sent() == size_t{kRequests} * (4 + 4 + 2 + 2 + (64 << 10)));
  ::close(c);
}

TEST_CASE("a listener added at run time advertises a single broker at its own port, and removing it frees the port") {
  FakeBroker broker;
  RunningProxy kp(broker.port());
  std::vector<config::ListenerConfig> none;
  auto entry = config::load_listener_entry(
      R"({"listen": "127.0.0.1:0", "upstream": "127.0.0.1:)" + std::to_string(broker.port()) + R"(", "broker_ports": "listen"})", "late",
      *kp.proxy->config(), none, "test");
  REQUIRE_MESSAGE(entry.listener.has_value(), entry.error_text());
  auto added = kp.proxy->add_listener(*entry.listener);
  REQUIRE_MESSAGE(added.error.empty(), added.error);
  CHECK(added.index == kp.proxy->config()->listeners.size());
  REQUIRE(added.port != 0);
  CHECK(kp.proxy->listener_port(added.index) == added.port);
  REQUIRE(kp.proxy->runtime_listeners().size() == 1);
  // The same name again: 409.
  auto again = kp.proxy->add_listener(*entry.listener);
  CHECK(again.status == 409);
  int c = connect_to(added.port);
  std::vector<uint8_t> body;
  codec::Writer w(body);
  codec::MetadataRequest req;
  req.write(w, 12);
  write_all(c, request(3, 12, 5, body));
  auto response = read_frame(c);
  REQUIRE(response.has_value());
  codec::Bytes message(*response);
  codec::ResponseHeader h;
  REQUIRE(codec::read_response_header(message, codec::response_header_version(3, 12), h, nullptr));
  codec::MetadataResponse m;
  codec::Reader r(message.subspan(h.size));
  m.read(r, 12);
  REQUIRE(r.ok());
  REQUIRE(m.brokers.size() == 1);
  CHECK(m.brokers[0].host == "127.0.0.1");
  CHECK(m.brokers[0].port == added.port);  // broker_ports: listen: the broker at the listener's own port
  CHECK(kp.proxy->remove_listener("late", 0ms));
  CHECK_FALSE(kp.proxy->remove_listener("late", 0ms));
  CHECK(kp.proxy->runtime_listeners().empty());
  // The open connection was closed (Toxiproxy's semantics for a deleted proxy) and nothing listens.
  char byte = 0;
  CHECK(::recv(c, &byte, 1, 0) <= 0);
  ::close(c);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(added.port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0);
  ::close(fd);
  // The slot is free again.
  auto third = kp.proxy->add_listener(*entry.listener);
  CHECK(third.error.empty());
  CHECK(kp.proxy->remove_listener("late", 0ms));
}
