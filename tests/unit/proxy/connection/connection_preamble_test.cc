// ConnectionPreamble: every path from a listener's first bytes to a route, without a socket.
#include "proxy/connection/connection_preamble.h"

#include <doctest/doctest.h>

#include "tests/unit/support/client_hello.h"

#include <string>
#include <vector>

using namespace kproxy;
using namespace std::chrono_literals;
using connection::ConnectionPreamble;
using connection::PreambleStep;
using connection::SniOutcome;
using Kind = PreambleStep::Kind;

namespace {

const std::vector<uint8_t> kSignature = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

/// A PROXY v2 header, TCP over IPv4, 192.0.2.10:51000 -> 10.0.0.5:9092, with an authority TLV
/// when `authority` is not empty.
std::vector<uint8_t> proxy_header(const std::string& authority = "") {
  std::vector<uint8_t> body = {192, 0, 2, 10, 10, 0, 0, 5, 0xC7, 0x38, 0x23, 0x84};
  if (!authority.empty()) {
    body.insert(body.end(), {0x02, static_cast<uint8_t>(authority.size() >> 8), static_cast<uint8_t>(authority.size())});
    body.insert(body.end(), authority.begin(), authority.end());
  }
  std::vector<uint8_t> out = kSignature;
  out.insert(out.end(), {0x21, 0x11, static_cast<uint8_t>(body.size() >> 8), static_cast<uint8_t>(body.size())});
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

std::vector<uint8_t> concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

config::SniConfig sni_config() {
  config::SniConfig c;
  c.bootstrap = "kafka.example.com";
  c.broker = *config::BrokerHostPattern::make("broker-$(nodeId).kafka.example.com", nullptr);
  c.advertised_port = 443;
  c.unknown = config::UnknownServerName::kRefuse;
  c.client_hello_timeout = 5000ms;
  return c;
}

const ConnectionPreamble::time_point kOpened{std::chrono::seconds(1000)};

ConnectionPreamble::Setup setup(bool proxy_protocol, const config::SniConfig* sni, bool tls) {
  return ConnectionPreamble::Setup{proxy_protocol, sni, tls, kOpened, 3000ms};
}

const std::vector<uint8_t> kApiVersionsStart = {0, 0, 0, 10, 0, 18, 0, 3};

}  // namespace

TEST_CASE("a listener without proxy_protocol or sni has no preamble") {
  auto sni = sni_config();
  CHECK_FALSE(ConnectionPreamble::needed(setup(false, nullptr, false)));
  CHECK_FALSE(ConnectionPreamble::needed(setup(false, nullptr, true)));
  CHECK(ConnectionPreamble::needed(setup(true, nullptr, false)));
  CHECK(ConnectionPreamble::needed(setup(false, &sni, true)));
  CHECK(ConnectionPreamble::needed(setup(false, &sni, false)));  // routed by a PROXY header's authority
}

TEST_CASE("PROXY header, no SNI: the header's client and the bytes after it are forwarded") {
  ConnectionPreamble p(setup(true, nullptr, false));
  CHECK(p.phase_name() == "awaiting_proxy_header");
  CHECK(p.reading());
  CHECK(p.deadline() == kOpened + 3000ms);
  auto bytes = concat(proxy_header(), kApiVersionsStart);
  // Split inside the header: the first part asks for more and names no client yet.
  PreambleStep first = p.feed(codec::Bytes(bytes.data(), 9));
  CHECK(first.kind == Kind::kNeedMore);
  CHECK_FALSE(first.proxy_header.has_value());
  PreambleStep rest = p.feed(codec::Bytes(bytes.data() + 9, bytes.size() - 9));
  REQUIRE(rest.kind == Kind::kForward);
  REQUIRE(rest.proxy_header.has_value());
  CHECK(rest.proxy_header->source == "192.0.2.10:51000");
  CHECK(rest.bytes == kApiVersionsStart);
  CHECK(p.phase_name() == "routed");
  CHECK_FALSE(p.reading());
  CHECK(p.deadline() == ConnectionPreamble::time_point::max());
}

TEST_CASE("a client that connects directly to a proxy_protocol listener is refused, and a late header too") {
  SUBCASE("no signature") {
    ConnectionPreamble p(setup(true, nullptr, false));
    PreambleStep step = p.feed(kApiVersionsStart);
    // Eight bytes can still be the start of a signature only if they match it: these do not.
    REQUIRE(step.kind == Kind::kRefuse);
    CHECK(step.proxy_header_refused);
    CHECK(step.reason.category == net::CloseCategory::kClientProtocolError);
    CHECK(step.reason.detail.rfind("PROXY protocol: ", 0) == 0);
  }
  SUBCASE("not in time") {
    ConnectionPreamble p(setup(true, nullptr, false));
    CHECK(p.feed(codec::Bytes(kSignature.data(), 4)).kind == Kind::kNeedMore);
    PreambleStep step = p.on_deadline();
    REQUIRE(step.kind == Kind::kRefuse);
    CHECK(step.proxy_header_refused);
    CHECK(step.reason.detail == "no PROXY protocol header within 3000 ms (limits.proxy_header_timeout)");
    CHECK(p.on_deadline().kind == Kind::kNeedMore);  // once only
  }
}

TEST_CASE("SNI with TLS: the ClientHello routes, and every byte read is handed back for the TLS session") {
  auto sni = sni_config();
  ConnectionPreamble p(setup(false, &sni, true));
  CHECK(p.phase_name() == "awaiting_client_hello");
  CHECK(p.deadline() == kOpened + 5000ms);
  auto hello = kproxy::testing::client_hello("broker-2.kafka.example.com");
  PreambleStep a = p.feed(codec::Bytes(hello.data(), 20));
  CHECK(a.kind == Kind::kNeedMore);
  PreambleStep b = p.feed(codec::Bytes(hello.data() + 20, hello.size() - 20));
  REQUIRE(b.kind == Kind::kRoute);
  CHECK(b.route.outcome == SniOutcome::kBroker);
  CHECK(b.route.node_id == 2);
  CHECK(b.name == "SNI 'broker-2.kafka.example.com'");
  CHECK(b.bytes == hello);
  CHECK(p.phase_name() == "routed");
}

TEST_CASE("SNI: a ClientHello not whole by sni.client_hello_timeout routes as the timeout outcome") {
  auto sni = sni_config();
  ConnectionPreamble p(setup(false, &sni, true));
  auto hello = kproxy::testing::client_hello("kafka.example.com");
  CHECK(p.feed(codec::Bytes(hello.data(), 10)).kind == Kind::kNeedMore);
  PreambleStep step = p.on_deadline();
  REQUIRE(step.kind == Kind::kRoute);
  CHECK(step.route.outcome == SniOutcome::kTimeout);
  CHECK_FALSE(step.route.serve());
  CHECK(step.name == "SNI: ClientHello");
}

TEST_CASE("SNI: bytes that are not TLS route as not_tls at once") {
  auto sni = sni_config();
  ConnectionPreamble p(setup(false, &sni, true));
  PreambleStep step = p.feed(kApiVersionsStart);
  REQUIRE(step.kind == Kind::kRoute);
  CHECK(step.route.outcome == SniOutcome::kNotTls);
  CHECK(step.bytes == kApiVersionsStart);
}

TEST_CASE("PROXY header then ClientHello in one read; the ClientHello's deadline still runs from the accept") {
  auto sni = sni_config();
  ConnectionPreamble p(setup(true, &sni, true));
  auto hello = kproxy::testing::client_hello("kafka.example.com");
  SUBCASE("one read") {
    PreambleStep step = p.feed(concat(proxy_header(), hello));
    REQUIRE(step.kind == Kind::kRoute);
    CHECK(step.route.outcome == SniOutcome::kBootstrap);
    REQUIRE(step.proxy_header.has_value());
    CHECK(step.proxy_header->source == "192.0.2.10:51000");
    CHECK(step.bytes == hello);  // the header is not replayed to the TLS session
  }
  SUBCASE("the header alone, then the hello") {
    PreambleStep header = p.feed(proxy_header());
    CHECK(header.kind == Kind::kNeedMore);
    CHECK(header.proxy_header.has_value());
    CHECK(p.phase_name() == "awaiting_client_hello");
    CHECK(p.deadline() == kOpened + 5000ms);
    PreambleStep step = p.feed(hello);
    REQUIRE(step.kind == Kind::kRoute);
    CHECK(step.route.outcome == SniOutcome::kBootstrap);
    CHECK_FALSE(step.proxy_header.has_value());  // named once
  }
}

TEST_CASE("SNI without TLS here: the PROXY header's authority routes") {
  auto sni = sni_config();
  ConnectionPreamble p(setup(true, &sni, false));
  SUBCASE("a broker's name") {
    PreambleStep step = p.feed(concat(proxy_header("Broker-1.Kafka.Example.com"), kApiVersionsStart));
    REQUIRE(step.kind == Kind::kRoute);
    CHECK(step.route.outcome == SniOutcome::kBroker);
    CHECK(step.route.node_id == 1);
    CHECK(step.name == "PROXY authority 'Broker-1.Kafka.Example.com'");
    CHECK(step.bytes == kApiVersionsStart);
  }
  SUBCASE("no authority: no name, refused as sni.unknown says") {
    PreambleStep step = p.feed(proxy_header());
    REQUIRE(step.kind == Kind::kRoute);
    CHECK(step.route.outcome == SniOutcome::kNoNameRefused);
    CHECK(step.route.refuse());
  }
}

TEST_CASE("a broker no response named yet: the route and the bytes wait for the discovery, once") {
  auto sni = sni_config();
  ConnectionPreamble p(setup(false, &sni, true));
  auto hello = kproxy::testing::client_hello("broker-7.kafka.example.com");
  PreambleStep step = p.feed(hello);
  REQUIRE(step.kind == Kind::kRoute);
  CHECK_FALSE(p.asked_brokers());
  p.await_brokers(std::move(step));
  CHECK(p.asked_brokers());
  CHECK(p.phase_name() == "awaiting_brokers");
  CHECK_FALSE(p.reading());
  CHECK(p.deadline() == ConnectionPreamble::time_point::max());  // the discovery has its own timeout
  CHECK(p.on_deadline().kind == Kind::kNeedMore);
  PreambleStep again = p.brokers_discovered();
  REQUIRE(again.kind == Kind::kRoute);
  CHECK(again.route.outcome == SniOutcome::kBroker);
  CHECK(again.route.node_id == 7);
  CHECK(again.bytes == hello);
  CHECK(p.phase_name() == "routed");
  CHECK(p.asked_brokers());                               // a second unknown node is not asked about again
  CHECK(p.brokers_discovered().kind == Kind::kNeedMore);  // nothing held any more
}
