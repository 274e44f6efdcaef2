#include "proxy/net/bound_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "tests/unit/support/test_ports.h"

using namespace kproxy;

TEST_CASE("port 0 binds a port the kernel picks and says which") {
  net::BoundSocket a = net::bind_tcp_socket("127.0.0.1", 0);
  REQUIRE(a.socket);
  CHECK(a.error.empty());
  CHECK(a.port != 0);
  CHECK(net::local_port(a.socket.get()) == a.port);
  // A port someone listens on cannot be bound again; the error names the address.
  REQUIRE(::listen(a.socket.get(), 1) == 0);
  net::BoundSocket b = net::bind_tcp_socket("127.0.0.1", a.port);
  CHECK_FALSE(b.socket);
  CHECK(b.error == "cannot listen on 127.0.0.1:" + std::to_string(a.port) + ": address already in use");
}

TEST_CASE("IPv6 hosts and bad hosts") {
  net::BoundSocket v6 = net::bind_tcp_socket("::1", 0);
  if (v6.socket) {  // a host without IPv6 loopback says why instead
    CHECK(v6.port != 0);
  } else {
    CHECK(v6.error.rfind("cannot listen on [::1]:0: ", 0) == 0);
  }
  net::BoundSocket bad = net::bind_tcp_socket("kafka.example.com", 9092);
  CHECK_FALSE(bad.socket);
  CHECK(bad.error == "listen address 'kafka.example.com' is not an IP address");
  CHECK(net::local_port(-1) == 0);
}

TEST_CASE("a named port binds that port; the socket is non-blocking, close-on-exec, SO_REUSEADDR and not yet listening") {
  const uint16_t port = testing::reserved_port();
  net::BoundSocket s = net::bind_tcp_socket("127.0.0.1", port);
  REQUIRE_MESSAGE(s.socket, s.error);
  CHECK(s.error.empty());
  CHECK(s.port == port);
  CHECK(net::local_port(s.socket.get()) == port);
  const int fd = s.socket.get();
  CHECK((::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
  CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  int value = 0;
  socklen_t len = sizeof(value);
  REQUIRE(::getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &value, &len) == 0);
  CHECK(value != 0);
  // Bound, not listening: the workers listen on duplicates later.
  value = -1;
  len = sizeof(value);
  REQUIRE(::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) == 0);
  CHECK(value == 0);
  int type = 0;
  len = sizeof(type);
  REQUIRE(::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0);
  CHECK(type == SOCK_STREAM);
}

TEST_CASE("a host that is no local address is refused with the address in the error; local_port of a non-socket is 0") {
  // 192.0.2.1 (TEST-NET-1, RFC 5737) is on no interface of the machine: bind fails.
  net::BoundSocket foreign = net::bind_tcp_socket("192.0.2.1", 0);
  CHECK_FALSE(foreign.socket);
  CHECK(foreign.port == 0);
  CHECK(foreign.error == "cannot listen on 192.0.2.1:0: address not available");
  net::BoundSocket empty = net::bind_tcp_socket("", 0);
  CHECK_FALSE(empty.socket);
  CHECK(empty.error == "listen address '' is not an IP address");
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  CHECK(net::local_port(pipe_fds[0]) == 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}
