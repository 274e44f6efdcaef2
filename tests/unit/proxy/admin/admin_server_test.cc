#include "proxy/admin/admin_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <doctest/doctest.h>

using namespace kproxy::admin;

namespace {

/// Sends `raw` to 127.0.0.1:port and reads until the server closes; returns everything read.
std::string http_exchange(uint16_t port, const std::string& raw, size_t max_read = 1 << 20) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t sent = 0;
  while (sent < raw.size()) {
    ssize_t n = ::send(fd, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string out;
  char buf[4096];
  while (out.size() < max_read) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string get(uint16_t port, const std::string& target, const std::string& extra_headers = "") {
  return http_exchange(port, "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + extra_headers + "Connection: close\r\n\r\n");
}

int status_of(const std::string& response) {
  if (response.size() < 12) return -1;
  return std::stoi(response.substr(9, 3));
}

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
  CHECK_FALSE(constant_time_equal("secre", "secret"));     // a prefix of the secret
  CHECK_FALSE(constant_time_equal("secrett", "secret"));   // the secret plus its last byte again
  CHECK_FALSE(constant_time_equal(std::string(1000, 's'), "secret"));
  CHECK(constant_time_equal("", ""));
  // Embedded NULs are compared like any byte.
  CHECK_FALSE(constant_time_equal(std::string_view("sec\0et", 6), "secret"));
  CHECK(constant_time_equal(std::string_view("sec\0et", 6), std::string_view("sec\0et", 6)));
}

TEST_CASE("admin server: routing without HTTP (handle)") {
  AdminServer server;
  server.route("GET", "/faults", [](const HttpRequest&) { return HttpResponse{200, "application/json", "[]"}; });
  server.route("GET", "/faults/{name}", [](const HttpRequest& r) { return HttpResponse{200, "text/plain", "one:" + r.path_params.at("name")}; });
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
