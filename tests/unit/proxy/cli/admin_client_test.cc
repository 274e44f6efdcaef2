#include "proxy/cli/admin_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <doctest/doctest.h>

using namespace kproxy;

namespace {
/// A listening loopback socket on a free port; closed at the end of the test.
struct Listening {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port = 0;
  Listening() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~Listening() { ::close(fd); }
};
}  // namespace

TEST_CASE("admin client: the request head names the host, closes, and carries the token only when given") {
  CHECK(cli::admin_request_head("GET", "/tap?api=Produce", "127.0.0.1:9644", "") ==
        "GET /tap?api=Produce HTTP/1.1\r\nHost: 127.0.0.1:9644\r\nConnection: close\r\n");
  CHECK(cli::admin_request_head("PUT", "/faults/x", "[::1]:9644", "s3cret") ==
        "PUT /faults/x HTTP/1.1\r\nHost: [::1]:9644\r\nConnection: close\r\nAuthorization: Bearer s3cret\r\n");
}

TEST_CASE("admin client: malformed, unresolvable and refused addresses say why") {
  std::string error;
  CHECK(cli::connect_admin("localhost", error) == -1);
  CHECK(error == "bad admin address 'localhost' (expected HOST:PORT)");
  CHECK(cli::connect_admin("[::1]", error) == -1);
  CHECK(error == "bad admin address '[::1]' (expected HOST:PORT)");
  CHECK(cli::connect_admin("no-such-host.invalid:9644", error) == -1);
  CHECK(error == "cannot resolve no-such-host.invalid:9644");
  uint16_t closed_port;
  {
    Listening gone;
    closed_port = gone.port;
  }
  std::string address = "127.0.0.1:" + std::to_string(closed_port);
  CHECK(cli::connect_admin(address, error) == -1);
  CHECK(error == "cannot connect to " + address + ": Connection refused (is kproxy running with admin.listen set?)");
}

TEST_CASE("admin client: connects to a listener and sends the whole request") {
  Listening listener;
  std::string error;
  int fd = cli::connect_admin("127.0.0.1:" + std::to_string(listener.port), error);
  REQUIRE_MESSAGE(fd >= 0, error);
  int peer = ::accept(listener.fd, nullptr, nullptr);
  REQUIRE(peer >= 0);
  std::string request = cli::admin_request_head("GET", "/healthz", "127.0.0.1", "") + "\r\n" + std::string(20000, 'x');
  CHECK(cli::send_all(fd, request));
  ::close(fd);
  std::string got;
  char buf[65536];
  for (ssize_t n; (n = ::recv(peer, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(peer);
  CHECK(got == request);
}

namespace {
/// What read_response makes of `response` written to one end of a socket pair (then closed).
struct Read {
  bool ok = false;
  int status = 0;
  std::string body, error;
  size_t pieces = 0;
};
Read read_from(const std::string& response) {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  REQUIRE(kproxy::cli::send_all(fds[0], response));
  ::close(fds[0]);
  Read r;
  r.ok = kproxy::cli::read_response(
      fds[1],
      [&](int status) {
        r.status = status;
        return true;
      },
      [&](std::string_view piece) {
        r.body.append(piece);
        ++r.pieces;
        return true;
      },
      r.error);
  ::close(fds[1]);
  return r;
}
}  // namespace

TEST_CASE("admin client: one response reader for both CLIs, chunked or not") {
  auto plain = read_from("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  CHECK(plain.ok);
  CHECK(plain.status == 200);
  CHECK(plain.body == "hello");
  auto chunked = read_from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7\r\n world\n\r\n0\r\n\r\n");
  CHECK(chunked.ok);
  CHECK(chunked.body == "hello world\n");
  CHECK(chunked.pieces == 2);
  auto refused = read_from("HTTP/1.1 401 Unauthorized\r\nContent-Length: 9\r\n\r\n{\"e\":\"x\"}");
  CHECK(refused.status == 401);
  CHECK(refused.body == "{\"e\":\"x\"}");
  auto nothing = read_from("garbage without a head");
  CHECK_FALSE(nothing.ok);
  CHECK(nothing.error == "no HTTP answer");
}
