// Listener: binds its spec's address (or listens on a duplicate of another worker's socket),
// registers where it listens with the SelfConnectionDetector until it is destroyed, reports why
// it cannot listen, and hands accepted connections to its worker.
#include "proxy/runtime/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <memory>
#include <string>

#include <doctest/doctest.h>

#include "proxy/runtime/worker.h"
#include "tests/unit/support/running_proxy.h"

using namespace kproxy;

namespace {

connection::ListenerSpec spec_for(const std::string& host, uint16_t port) {
  return connection::ListenerSpec{0, "unit", host, port, -1, false};
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

bool own_listener(const kproxy::testing::TestProxy& p, uint16_t port) {
  sockaddr_in a = loopback(port);
  return p.services.self_connections.is_own_listener(reinterpret_cast<const sockaddr*>(&a));
}

}  // namespace

TEST_CASE("listener: open() listens on its address, which counts as kproxy's own until the listener is gone") {
  kproxy::testing::SilentUpstream upstream;
  kproxy::testing::TestProxy p(upstream.port);
  uint16_t port = kproxy::testing::reserved_port();
  {
    runtime::Worker worker(*p.proxy, 0);  // never started: its loop runs only to close
    {
      runtime::Listener listener(worker, spec_for("127.0.0.1", port));
      CHECK(listener.fd() == -1);  // not open yet
      REQUIRE(listener.open() == "");
      CHECK(listener.fd() >= 0);
      CHECK(listener.spec().port == port);
      CHECK(listener.shared_spec()->label() == "unit");
      CHECK(own_listener(p, port));                          // a broker address that leads here is a loop
      int client = kproxy::testing::connect_loopback(port);  // the kernel completes it: something listens
      CHECK(client >= 0);
      if (client >= 0) ::close(client);
    }
    CHECK_FALSE(own_listener(p, port));
  }  // the worker closes its loop: cleanly, checked by ~TestProxy
}

TEST_CASE("listener: an address that is no IP or is taken is reported, not thrown") {
  kproxy::testing::SilentUpstream upstream;
  kproxy::testing::TestProxy p(upstream.port);
  uint16_t port = kproxy::testing::reserved_port();
  {
    runtime::Worker worker(*p.proxy, 0);
    runtime::Listener named(worker, spec_for("localhost", port));
    std::string error = named.open();
    CHECK(error == "listen address 'localhost' is not an IP address");
    CHECK(named.fd() == -1);

    runtime::Listener first(worker, spec_for("127.0.0.1", port));
    REQUIRE(first.open() == "");
    runtime::Listener second(worker, spec_for("127.0.0.1", port));
    error = second.open();
    INFO(error);
    CHECK(error.find("cannot listen on 127.0.0.1:" + std::to_string(port)) == 0);
  }
}

TEST_CASE("listener: open_shared() listens on a duplicate of another listener's socket") {
  kproxy::testing::SilentUpstream upstream;
  kproxy::testing::TestProxy p(upstream.port);
  uint16_t port = kproxy::testing::reserved_port();
  {
    runtime::Worker a(*p.proxy, 0);
    runtime::Worker b(*p.proxy, 1);
    auto bound = std::make_unique<runtime::Listener>(a, spec_for("127.0.0.1", port));
    REQUIRE(bound->open() == "");
    runtime::Listener shared(b, spec_for("127.0.0.1", port));
    REQUIRE(shared.open_shared(bound->fd()) == "");
    CHECK(shared.fd() >= 0);
    CHECK(shared.fd() != bound->fd());  // its own descriptor of the same socket

    bound.reset();  // the first worker's listener goes: the shared one still listens
    int client = kproxy::testing::connect_loopback(port);
    CHECK(client >= 0);
    if (client >= 0) ::close(client);

    runtime::Listener broken(b, spec_for("127.0.0.1", port));
    std::string error = broken.open_shared(-1);
    CHECK(error.find("cannot share the listening socket") == 0);
    CHECK(broken.fd() == -1);
  }
}

TEST_CASE("listener: an accepted connection is handed to the worker, which serves it") {
  kproxy::testing::SilentUpstream upstream;
  kproxy::testing::TestProxy p(upstream.port);
  p.start();
  auto accepted_before = p.count(metrics::ProxyEvent::kConnectionAccepted);
  int client = kproxy::testing::connect_loopback(p.port);
  REQUIRE(client >= 0);
  CHECK(kproxy::testing::wait_until([&] { return p.count(metrics::ProxyEvent::kConnectionAccepted) == accepted_before + 1; }));
  CHECK(kproxy::testing::connections_on(p.proxy->worker(0)) == size_t{1});
  ::close(client);
  CHECK(kproxy::testing::wait_until([&] { return kproxy::testing::connections_on(p.proxy->worker(0)) == size_t{0}; }));
}
