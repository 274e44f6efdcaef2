#include "proxy/net/self_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <doctest/doctest.h>

using kproxy::net::SelfConnectionDetector;

namespace {

sockaddr_storage v4(const char* ip, uint16_t port) {
  sockaddr_storage s{};
  auto& a = reinterpret_cast<sockaddr_in&>(s);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return s;
}

sockaddr_storage v6(const char* ip, uint16_t port) {
  sockaddr_storage s{};
  auto& a = reinterpret_cast<sockaddr_in6&>(s);
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &a.sin6_addr);
  return s;
}

const sockaddr* as_sockaddr(const sockaddr_storage& s) { return reinterpret_cast<const sockaddr*>(&s); }

}  // namespace

TEST_CASE("self connection: the accept finds an upstream connection registered before it") {
  SelfConnectionDetector d;
  auto proxy_listener = v4("127.0.0.1", 40100);
  auto ours = SelfConnectionDetector::connection_key(v4("127.0.0.1", 40001), proxy_listener);
  CHECK_FALSE(d.connected(ours));
  CHECK(d.accepted(ours));  // kproxy reached itself
  // Another host, another source port, or the same source port to another peer: not ours. (The
  // kernel gives one local port to connections to different peers: seen in bench/tls, where a
  // chain of kproxies on one host shares source ports.)
  CHECK_FALSE(d.accepted(SelfConnectionDetector::connection_key(v4("127.0.0.2", 40001), proxy_listener)));
  CHECK_FALSE(d.accepted(SelfConnectionDetector::connection_key(v4("127.0.0.1", 40002), proxy_listener)));
  CHECK_FALSE(d.accepted(SelfConnectionDetector::connection_key(v4("127.0.0.1", 40001), v4("127.0.0.1", 40101))));
}

TEST_CASE("self connection: the connect callback finds an accept registered before it") {
  SelfConnectionDetector d;
  auto ours = SelfConnectionDetector::connection_key(v6("::1", 40003), v6("::1", 40102));
  CHECK_FALSE(d.accepted(ours));
  CHECK(d.connected(ours));
  CHECK(SelfConnectionDetector::connection_key(v6("::1", 40003), sockaddr_storage{}).empty());
}

TEST_CASE("self connection: keys are 16 bytes and tell every part of the four-tuple apart") {
  static_assert(sizeof(kproxy::net::ConnectionKey) == 16);
  using D = SelfConnectionDetector;
  auto base4 = D::connection_key(v4("127.0.0.1", 40001), v4("127.0.0.2", 40100));
  CHECK_FALSE(base4.empty());
  CHECK(base4 == D::connection_key(v4("127.0.0.1", 40001), v4("127.0.0.2", 40100)));
  CHECK_FALSE(base4 == D::connection_key(v4("127.0.0.2", 40100), v4("127.0.0.1", 40001)));  // direction matters
  CHECK_FALSE(base4 == D::connection_key(v4("127.0.0.1", 40001), v4("127.0.0.2", 40101)));
  CHECK_FALSE(base4 == D::connection_key(v4("127.0.0.3", 40001), v4("127.0.0.2", 40100)));
  auto base6 = D::connection_key(v6("::1", 40001), v6("::1", 40100));
  CHECK_FALSE(base6.empty());
  CHECK(base6 == D::connection_key(v6("::1", 40001), v6("::1", 40100)));
  CHECK_FALSE(base6 == D::connection_key(v6("::1", 40002), v6("::1", 40100)));
  CHECK_FALSE(base6 == D::connection_key(v6("::1", 40100), v6("::1", 40001)));
  CHECK_FALSE(base6 == D::connection_key(v6("::2", 40001), v6("::1", 40100)));
  // IPv4 keys carry a mark IPv6 keys never have.
  CHECK((base4.low >> 63) == 1);
  CHECK((base6.low >> 63) == 0);
}

TEST_CASE("self connection: closed connections are forgotten (the kernel reuses four-tuples)") {
  SelfConnectionDetector d;
  auto a = SelfConnectionDetector::connection_key(v4("127.0.0.1", 40004), v4("127.0.0.1", 40100));
  auto u = SelfConnectionDetector::connection_key(v4("127.0.0.1", 40005), v4("127.0.0.1", 40100));
  CHECK_FALSE(d.accepted(a));
  CHECK_FALSE(d.connected(u));
  CHECK(d.size() == 2);
  d.accepted_closed(a);
  d.upstream_closed(u);
  CHECK(d.size() == 0);
  CHECK_FALSE(d.connected(a));
  CHECK_FALSE(d.accepted(u));
}

TEST_CASE("self connection: a target kproxy listens on is found before connecting") {
  SelfConnectionDetector d;
  d.listener_opened(v4("127.0.0.1", 40010));
  d.listener_opened(v4("127.0.0.1", 40010));  // a second worker's socket on the same address
  d.listener_opened(v4("0.0.0.0", 40011));
  CHECK(d.is_own_listener(as_sockaddr(v4("127.0.0.1", 40010))));
  CHECK_FALSE(d.is_own_listener(as_sockaddr(v4("127.0.0.1", 40012))));
  CHECK_FALSE(d.is_own_listener(as_sockaddr(v4("127.0.0.2", 40010))));  // bound to 127.0.0.1 only
  // A listener on 0.0.0.0 is reached through any address of this host, not through another host.
  CHECK(d.is_own_listener(as_sockaddr(v4("127.0.0.1", 40011))));
  CHECK(d.is_own_listener(as_sockaddr(v4("127.9.9.9", 40011))));
  CHECK_FALSE(d.is_own_listener(as_sockaddr(v4("192.0.2.7", 40011))));  // TEST-NET-1: never local
  d.listener_closed(v4("127.0.0.1", 40010));
  CHECK(d.is_own_listener(as_sockaddr(v4("127.0.0.1", 40010))));  // one worker still listens
  d.listener_closed(v4("127.0.0.1", 40010));
  CHECK_FALSE(d.is_own_listener(as_sockaddr(v4("127.0.0.1", 40010))));
}

TEST_CASE("self connection: a broker advertised at kproxy's own address gets no broker port (issue #46)") {
  SelfConnectionDetector d;
  d.listener_opened(v4("127.0.0.1", 40020));  // the bootstrap port
  // A broker advertised at the bootstrap port, or at the very port kproxy would open for it.
  CHECK(d.advertises_kproxy("127.0.0.1", 40020, "127.0.0.1", 40031));
  CHECK(d.advertises_kproxy("localhost", 40020, "127.0.0.1", 40031));
  CHECK(d.advertises_kproxy("127.0.0.1", 40031, "127.0.0.1", 40031));
  CHECK(d.advertises_kproxy("127.0.0.1", 40031, "0.0.0.0", 40031));
  // A real broker: another port, another host, or a name (resolved at connect, checked there).
  CHECK_FALSE(d.advertises_kproxy("127.0.0.1", 9092, "127.0.0.1", 40031));
  CHECK_FALSE(d.advertises_kproxy("127.0.0.2", 40031, "127.0.0.1", 40031));
  CHECK_FALSE(d.advertises_kproxy("192.0.2.7", 40031, "0.0.0.0", 40031));
  CHECK_FALSE(d.advertises_kproxy("broker-1.example", 40031, "127.0.0.1", 40031));
  CHECK(d.advertises_kproxy("::1", 40031, "::1", 40031));
}
