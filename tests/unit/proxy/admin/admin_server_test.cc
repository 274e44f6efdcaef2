#include "proxy/admin/admin_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "tests/unit/support/http_exchange.h"
#include "tests/unit/support/manual_clock.h"

using namespace kproxy::admin;

namespace {

std::string http_exchange(uint16_t port, const std::string& raw, size_t max_read = 1 << 20) {
  return kproxy::testing::http_exchange(port, raw, max_read, /*timeout_seconds=*/5);
}

std::string get(uint16_t port, const std::string& target, const std::string& extra_headers = "") {
  return http_exchange(port, "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + extra_headers + "Connection: close\r\n\r\n");
}

int status_of(const std::string& response) { return kproxy::testing::http_status_of(response); }

std::string body_of(const std::string& response) {
  size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

}  // namespace

TEST_CASE("admin server: parse_query and url_decode") {
  std::map<std::string, std::string> q;
  CHECK(parse_query("api=Produce&client_id=a%20b&x=1+2&flag", q));
  CHECK(q["api"] == "Produce");
  CHECK(q["client_id"] == "a b");
  CHECK(q["x"] == "1 2");
  CHECK(q.count("flag") == 1);
  std::map<std::string, std::string> bad;
  CHECK_FALSE(parse_query("a=%zz", bad));
  CHECK_FALSE(parse_query("a=%2", bad));
  std::string out;
  CHECK(url_decode("%41b%2F", out, false));
  CHECK(out == "Ab/");
}

TEST_CASE("admin server: constant_time_equal") {
  CHECK(constant_time_equal("secret", "secret"));
  CHECK_FALSE(constant_time_equal("secret", "secreT"));
  CHECK_FALSE(constant_time_equal("secret", "secret2"));
  CHECK_FALSE(constant_time_equal("", "x"));
  CHECK_FALSE(constant_time_equal("x", ""));
  CHECK_FALSE(constant_time_equal("secre", "secret"));    // a prefix of the secret
  CHECK_FALSE(constant_time_equal("secrett", "secret"));  // the secret plus its last byte again
  CHECK_FALSE(constant_time_equal(std::string(1000, 's'), "secret"));
  CHECK(constant_time_equal("", ""));
  // Embedded NULs are compared like any byte.
  CHECK_FALSE(constant_time_equal(std::string_view("sec\0et", 6), "secret"));
  CHECK(constant_time_equal(std::string_view("sec\0et", 6), std::string_view("sec\0et", 6)));
}

TEST_CASE("admin server: routing without HTTP (handle)") {
  AdminServer server;
  server.route("GET", "/faults", [](const HttpRequest&) { return HttpResponse{200, "application/json", "[]"}; });
  server.route("GET", "/faults/{name}", [](const HttpRequest& r) {
    return HttpResponse{200, "text/plain", "one:" + r.path_params.at("name")};
  });
  server.route("POST", "/faults/reset", [](const HttpRequest&) { return HttpResponse{200, "text/plain", "reset"}; });
  server.route("GET", "/faults/reset", [](const HttpRequest&) { return HttpResponse{200, "text/plain", "literal wins"}; });

  HttpRequest r;
  r.method = "GET";
  r.path = "/faults/orders";
  CHECK(server.handle(r).body == "one:orders");
  r.path = "/faults/reset";
  CHECK(server.handle(r).body == "literal wins");
  r.method = "POST";
  CHECK(server.handle(r).body == "reset");
  r.method = "DELETE";
  CHECK(server.handle(r).status == 405);
  // RFC 9110 §15.5.6: a 405 lists the methods the path serves (GET implies HEAD); those of the
  // most specific patterns only (DELETE /faults/{name} would not be listed for /faults/reset).
  CHECK(server.handle(r).allow == "GET, HEAD, POST");
  server.route("DELETE", "/faults/{name}", [](const HttpRequest&) { return HttpResponse{204, "text/plain", ""}; });
  r.method = "PATCH";
  CHECK(server.handle(r).allow == "GET, HEAD, POST");
  r.path = "/faults/orders";
  CHECK(server.handle(r).allow == "DELETE, GET, HEAD");
  r.path = "/faults/reset";
  r.method = "GET";
  r.path = "/nope";
  CHECK(server.handle(r).status == 404);
  r.path = "/faults/";
  CHECK(server.handle(r).body == "[]");
}

TEST_CASE("admin server: serves routes over HTTP on loopback, 404/405/400/413, bearer token") {
  AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  options.bearer_token = "s3cret";
  options.max_body_bytes = 64;
  AdminServer server(options);
  server.route("GET", "/hello/{who}", [](const HttpRequest& r) {
    return HttpResponse{200, "text/plain", "hello " + r.path_params.at("who") + " " + r.query_param("x", "-")};
  });
  server.route("PUT", "/echo", [](const HttpRequest& r) { return HttpResponse{201, "text/plain", r.body}; });
  server.route("GET", "/boom", [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("kaboom"); });
  REQUIRE(server.start() == "");
  uint16_t port = server.port();
  REQUIRE(port != 0);
  const std::string auth = "Authorization: Bearer s3cret\r\n";

  CHECK(status_of(get(port, "/hello/bob")) == 401);
  CHECK(status_of(get(port, "/hello/bob", "Authorization: Bearer s3cre\r\n")) == 401);
  CHECK(status_of(get(port, "/hello/bob", "Authorization: Basic s3cret\r\n")) == 401);
  std::string ok = get(port, "/hello/bob?x=a%20b", auth);
  CHECK(status_of(ok) == 200);
  CHECK(body_of(ok) == "hello bob a b");
  CHECK(status_of(get(port, "/nothing", auth)) == 404);
  CHECK(status_of(get(port, "/echo", auth)) == 405);
  CHECK(status_of(get(port, "/hello/bob?x=%zz", auth)) == 400);
  CHECK(status_of(get(port, "/boom", auth)) == 500);

  std::string put = http_exchange(port, "PUT /echo HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 5\r\n\r\nabcde");
  CHECK(status_of(put) == 201);
  CHECK(body_of(put) == "abcde");
  std::string big(100, 'x');
  std::string too_big = http_exchange(port, "PUT /echo HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 100\r\n\r\n" + big);
  CHECK(status_of(too_big) == 413);
  server.stop();
  CHECK(server.port() == 0);
}

TEST_CASE("admin server: streams in chunks, caps subscribers, stop ends streams") {
  AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  options.max_connections = 4;
  options.max_streams = 1;
  AdminServer server(options);
  server.stream_route(
      "/stream", "application/x-ndjson",
      [](const HttpRequest& r) { return r.query_param("refuse").empty() ? HttpResponse{} : json_error(400, "refused"); },
      [](const HttpRequest&, StreamWriter& w) {
        for (int i = 0; i < 3; ++i) w.write("line " + std::to_string(i) + "\n");
        while (!w.stopping()) {
          if (!w.write("\n")) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      });
  REQUIRE(server.start() == "");
  uint16_t port = server.port();
  CHECK(status_of(get(port, "/stream?refuse=1")) == 400);

  std::string first;
  std::thread reader([&] { first = get(port, "/stream"); });
  for (int i = 0; i < 200 && server.open_streams() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(server.open_streams() == 1);
  CHECK(status_of(get(port, "/stream")) == 503);
  server.stop();
  reader.join();
  CHECK(status_of(first) == 200);
  CHECK(first.find("line 2\n") != std::string::npos);
  CHECK(first.find("chunked") != std::string::npos);
}

namespace {

int connect_to(uint16_t port) { return kproxy::testing::loopback_connect(port); }

struct Timed {
  int status = -1;
  double ms = 0;
};

/// GET `target`, waiting at most `timeout` for the whole answer.
Timed timed_get(uint16_t port, const std::string& target, std::chrono::milliseconds timeout) {
  auto start = std::chrono::steady_clock::now();
  Timed t;
  int fd = connect_to(port);
  if (fd < 0) return t;
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string raw = "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  (void)::send(fd, raw.data(), raw.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  t.status = status_of(out);
  t.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return t;
}

}  // namespace

// Issue #15 bug 2: 20 connections that each sent one byte, or a byte every few seconds, held every
// civetweb thread for its 30 s request timeout, and /healthz timed out with them.
TEST_CASE("admin server: slow and trickling clients do not delay /healthz (probe answers < 1 s throughout)") {
  AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  AdminServer server(options);
  server.route("GET", "/healthz", [](const HttpRequest&) { return HttpResponse{200, "application/json", "{\"status\":\"ok\"}\n"}; });
  REQUIRE(server.start() == "");
  const uint16_t port = server.port();

  std::vector<int> slow;
  for (int i = 0; i < 24; ++i) {
    int fd = connect_to(port);
    REQUIRE(fd >= 0);
    (void)::send(fd, "G", 1, MSG_NOSIGNAL);
    slow.push_back(fd);
  }
  std::atomic<bool> done{false};
  std::vector<std::thread> tricklers;
  for (int i = 0; i < 6; ++i) {
    tricklers.emplace_back([&, i] {
      int fd = connect_to(port);
      if (fd < 0) return;
      const std::string head = "GET /healthz HTTP/1.1\r\nHost: trickle" + std::to_string(i) + "\r\n";
      for (size_t k = 0; k < head.size() && !done; ++k) {
        (void)::send(fd, head.data() + k, 1, MSG_NOSIGNAL);
        for (int w = 0; w < 10 && !done; ++w) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      ::close(fd);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // every slow client is in

  int answered = 0, probes = 0;
  double worst = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < until) {
    Timed t = timed_get(port, "/healthz", std::chrono::milliseconds(1000));
    ++probes;
    if (t.status == 200 && t.ms < 1000) ++answered;
    worst = std::max(worst, t.ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  MESSAGE("probes ", probes, ", answered within 1 s ", answered, ", slowest ", worst, " ms");
  CHECK(probes >= 4);
  CHECK(answered == probes);
  done = true;
  for (auto& t : tricklers) t.join();
  for (int fd : slow) ::close(fd);
  server.stop();
}

TEST_CASE("admin server: handlers that take long (every request thread busy) do not delay the probes") {
  AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  options.max_connections = 4;
  AdminServer server(options);
  server.route("GET", "/healthz", [](const HttpRequest&) { return HttpResponse{200, "text/plain", "ok"}; });
  server.route("GET", "/readyz", [](const HttpRequest&) { return HttpResponse{200, "text/plain", "ready"}; });
  server.route("GET", "/slow", [](const HttpRequest&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return HttpResponse{200, "text/plain", "late"};
  });
  REQUIRE(server.start() == "");
  const uint16_t port = server.port();
  std::vector<std::thread> busy;
  std::atomic<int> slow_ok{0};
  for (int i = 0; i < 8; ++i) {
    busy.emplace_back([&] {
      if (timed_get(port, "/slow", std::chrono::milliseconds(6000)).status == 200) ++slow_ok;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Timed live = timed_get(port, "/healthz", std::chrono::milliseconds(1000));
  Timed ready = timed_get(port, "/readyz", std::chrono::milliseconds(1000));
  MESSAGE("/healthz ", live.ms, " ms, /readyz ", ready.ms, " ms while 8 slow requests hold 4 threads");
  CHECK(live.status == 200);
  CHECK(live.ms < 500);
  CHECK(ready.status == 200);
  CHECK(ready.ms < 500);
  for (auto& t : busy) t.join();
  CHECK(slow_ok == 8);  // queued, then served: slow requests are delayed, not refused
}

TEST_CASE("admin server: a head that does not arrive in time gets 408 and is counted") {
  AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  options.head_timeout = std::chrono::milliseconds(300);
  AdminServer server(options);
  REQUIRE(server.start() == "");
  const auto before = server.refusals(408);
  int fd = connect_to(server.port());
  REQUIRE(fd >= 0);
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)::send(fd, "GET /x HT", 9, MSG_NOSIGNAL);
  auto start = std::chrono::steady_clock::now();
  std::string out;
  char buf[1024];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CHECK(status_of(out) == 408);
  CHECK(ms < 2000);
  CHECK(server.refusals(408) == before + 1);
}

TEST_CASE("admin server: past the per-address cap the oldest unfinished connection is dropped (503), a newcomer gets in") {
  AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  options.max_pending_per_address = 4;
  AdminServer server(options);
  server.route("GET", "/healthz", [](const HttpRequest&) { return HttpResponse{200, "text/plain", "ok"}; });
  REQUIRE(server.start() == "");
  const auto before = server.refusals(503);
  std::vector<int> slow;
  for (int i = 0; i < 6; ++i) {
    int fd = connect_to(server.port());
    REQUIRE(fd >= 0);
    (void)::send(fd, "GET /", 5, MSG_NOSIGNAL);
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    slow.push_back(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // accept order = age order
  }
  char buf[512];
  ssize_t n = ::recv(slow[0], buf, sizeof buf, 0);
  CHECK(n > 12);
  if (n > 12) CHECK(status_of(std::string(buf, static_cast<size_t>(n))) == 503);
  Timed probe = timed_get(server.port(), "/healthz", std::chrono::milliseconds(1000));
  CHECK(probe.status == 200);
  CHECK(server.refusals(503) >= before + 3);  // two to make room for slow[4] and [5], one for the probe
  for (int fd : slow) ::close(fd);
}

TEST_CASE("admin server: Expect 100-continue, Transfer-Encoding refused (411), HEAD has no body, the port is not shared") {
  AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  AdminServer server(options);
  server.route("PUT", "/echo", [](const HttpRequest& r) { return HttpResponse{201, "text/plain", r.body}; });
  server.route("GET", "/hello", [](const HttpRequest&) { return HttpResponse{200, "text/plain", "hello"}; });
  REQUIRE(server.start() == "");
  const uint16_t port = server.port();

  // The head alone first: the server says 100 Continue, then the body gets its answer.
  int fd = connect_to(port);
  REQUIRE(fd >= 0);
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string head_only = "PUT /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
  (void)::send(fd, head_only.data(), head_only.size(), MSG_NOSIGNAL);
  char buf[1024];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  CHECK(std::string(buf, static_cast<size_t>(std::max<ssize_t>(n, 0))) == "HTTP/1.1 100 Continue\r\n\r\n");
  (void)::send(fd, "abc", 3, MSG_NOSIGNAL);
  std::string cont;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) cont.append(buf, static_cast<size_t>(n));
  ::close(fd);
  CHECK(status_of(cont) == 201);
  CHECK(body_of(cont) == "abc");

  CHECK(status_of(http_exchange(port, "PUT /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")) == 411);
  std::string head = http_exchange(port, "HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(status_of(head) == 200);
  CHECK(head.find("Content-Length: 5\r\n") != std::string::npos);
  CHECK(body_of(head).empty());

  AdminServerOptions again;
  again.listen = "127.0.0.1:" + std::to_string(port);
  AdminServer second(again);
  CHECK(second.start().find("in use") != std::string::npos);
}

TEST_CASE("admin server: handle_message runs the server's steps over raw bytes") {
  AdminServerOptions options;
  options.bearer_token = "t";
  options.max_body_bytes = 8;
  AdminServer server(options);
  server.route("PUT", "/echo/{x}", [](const HttpRequest& r) {
    return HttpResponse{200, "text/plain", r.path_params.at("x") + ":" + r.body};
  });
  const std::string auth = "Authorization: Bearer t\r\n";
  CHECK(server.handle_message("PUT /echo/a%20b HTTP/1.1\r\n" + auth + "Content-Length: 2\r\n\r\nhi").body == "a b:hi");
  CHECK(server.handle_message("PUT /echo/a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi").status == 401);
  CHECK(server.handle_message("PUT /echo/a HTTP/1.1\r\n" + auth + "Content-Length: 9\r\n\r\n123456789").status == 413);
  CHECK(server.handle_message("PUT /echo/a HTTP/1.1\r\n" + auth + "Content-Length: 4\r\n\r\nhi").status == 408);
  CHECK(server.handle_message("PUT /echo/a%00 HTTP/1.1\r\n" + auth + "\r\n").status == 400);
  CHECK(server.handle_message("PUT /echo/a%2Fb HTTP/1.1\r\n" + auth + "\r\n").status == 400);
  CHECK(server.handle_message("PUT /echo/a").status == 408);
  CHECK(server.handle_message("PUT http://x/echo HTTP/1.1\r\n\r\n").status == 400);
}

TEST_CASE("admin server: the head deadline is read on the server's clock: 408 exactly when it has passed") {
  kproxy::testing::ManualClock clock;
  AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  options.head_timeout = std::chrono::seconds(5);
  options.clock = &clock;
  AdminServer server(options);
  REQUIRE(server.start() == "");
  int fd = connect_to(server.port());
  REQUIRE(fd >= 0);
  (void)::send(fd, "GET /x HT", 9, MSG_NOSIGNAL);
  // A whole request on a second connection, answered: the reader has read the first one's bytes
  // by then (they were there before the second connection was made), so its deadline is set.
  CHECK(timed_get(server.port(), "/nothing-here", std::chrono::milliseconds(5000)).status == 404);
  timeval short_wait{0, 200 * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &short_wait, sizeof short_wait);
  char buf[512];
  clock.advance(std::chrono::milliseconds(4900));
  server.wake();
  CHECK(::recv(fd, buf, sizeof buf, 0) < 0);  // 4.9 s of 5: nothing yet
  CHECK(server.refusals(408) == 0);
  clock.advance(std::chrono::milliseconds(200));
  server.wake();
  timeval long_wait{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &long_wait, sizeof long_wait);
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  REQUIRE(n > 0);
  CHECK(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 408", 0) == 0);
  CHECK(server.refusals(408) == 1);
  ::close(fd);
  server.stop();
}
