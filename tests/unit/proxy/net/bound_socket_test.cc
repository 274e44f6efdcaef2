#include "proxy/net/bound_socket.h"

#include <sys/socket.h>

#include <doctest/doctest.h>

using namespace kproxy;

TEST_CASE("port 0 binds a port the kernel picks and says which") {
  proxy::BoundSocket a = proxy::bind_tcp_socket("127.0.0.1", 0);
  REQUIRE(a.socket);
  CHECK(a.error.empty());
  CHECK(a.port != 0);
  CHECK(proxy::local_port(a.socket.get()) == a.port);
  // A port someone listens on cannot be bound again; the error names the address.
  REQUIRE(::listen(a.socket.get(), 1) == 0);
  proxy::BoundSocket b = proxy::bind_tcp_socket("127.0.0.1", a.port);
  CHECK_FALSE(b.socket);
  CHECK(b.error == "cannot listen on 127.0.0.1:" + std::to_string(a.port) + ": address already in use");
}

TEST_CASE("IPv6 hosts and bad hosts") {
  proxy::BoundSocket v6 = proxy::bind_tcp_socket("::1", 0);
  if (v6.socket) {  // a host without IPv6 loopback says why instead
    CHECK(v6.port != 0);
  } else {
    CHECK(v6.error.rfind("cannot listen on [::1]:0: ", 0) == 0);
  }
  proxy::BoundSocket bad = proxy::bind_tcp_socket("kafka.example.com", 9092);
  CHECK_FALSE(bad.socket);
  CHECK(bad.error == "listen address 'kafka.example.com' is not an IP address");
  CHECK(proxy::local_port(-1) == 0);
}
