#include "proxy/connection/sni_route.h"

#include <openssl/ssl.h>

#include <doctest/doctest.h>

#include "tests/unit/support/client_hello.h"

#include <string>
#include <vector>

using namespace kproxy;
using connection::SniOutcome;
using tls::ClientHelloReader;

using kproxy::testing::client_hello;

namespace {

config::SniConfig sni_config(config::UnknownServerName unknown) {
  config::SniConfig c;
  c.bootstrap = "kafka.example.com";
  c.broker = *config::BrokerHostPattern::make("broker-$(nodeId).kafka.example.com", nullptr);
  c.advertised_port = 443;
  c.unknown = unknown;
  return c;
}

connection::SniRoute route_of(const config::SniConfig& sni, const std::vector<uint8_t>& bytes) {
  ClientHelloReader reader;
  reader.feed(bytes);
  return connection::route_by_server_name(sni, reader);
}

}  // namespace

TEST_CASE("the bootstrap name and broker names, any case, a trailing dot removed") {
  auto sni = sni_config(config::UnknownServerName::kRefuse);
  CHECK(route_of(sni, client_hello("kafka.example.com")).outcome == SniOutcome::kBootstrap);
  CHECK(route_of(sni, client_hello("KAFKA.Example.com.")).outcome == SniOutcome::kBootstrap);
  auto broker = route_of(sni, client_hello("Broker-2.kafka.example.com"));
  CHECK(broker.outcome == SniOutcome::kBroker);
  CHECK(broker.node_id == 2);
  CHECK(broker.serve());
  CHECK_FALSE(broker.refuse());
}

TEST_CASE("unknown and missing names follow sni.unknown") {
  auto refuse = sni_config(config::UnknownServerName::kRefuse);
  auto bootstrap = sni_config(config::UnknownServerName::kBootstrap);
  auto other = client_hello("other.example.com");
  auto none = client_hello("");
  CHECK(route_of(refuse, other).outcome == SniOutcome::kUnknownNameRefused);
  CHECK(route_of(refuse, other).refuse());
  CHECK(route_of(bootstrap, other).outcome == SniOutcome::kUnknownNameBootstrap);
  CHECK(route_of(bootstrap, other).serve());
  CHECK(route_of(refuse, none).outcome == SniOutcome::kNoNameRefused);
  CHECK(route_of(bootstrap, none).outcome == SniOutcome::kNoNameBootstrap);
  // An address literal sent as a name (a non-conforming client) counts as none.
  CHECK(route_of(refuse, client_hello("127.0.0.1")).outcome == SniOutcome::kNoNameRefused);
  // A name of the pattern's shape that is not a node id form render() writes.
  CHECK(route_of(refuse, client_hello("broker-01.kafka.example.com")).outcome == SniOutcome::kUnknownNameRefused);
}

TEST_CASE("what cannot be read is closed, never served, whatever the policy") {
  auto sni = sni_config(config::UnknownServerName::kBootstrap);
  std::vector<uint8_t> kafka_request = {0, 0, 0, 20, 0, 18, 0, 3};
  auto not_tls = route_of(sni, kafka_request);
  CHECK(not_tls.outcome == SniOutcome::kNotTls);
  CHECK_FALSE(not_tls.serve());
  CHECK_FALSE(not_tls.refuse());

  ClientHelloReader small(64);
  small.feed(client_hello("kafka.example.com"));
  CHECK(connection::route_by_server_name(sni, small).outcome == SniOutcome::kTooLarge);

  ClientHelloReader unfinished;
  auto hello = client_hello("kafka.example.com");
  unfinished.feed(kproxy::codec::Bytes(hello.data(), 10));
  CHECK(connection::route_by_server_name(sni, unfinished).outcome == SniOutcome::kTimeout);
}

TEST_CASE("the log shows the name received, capped and printable, and the configured names") {
  tls::ClientHelloInfo none;
  CHECK(connection::shown_server_name(none) == "no server name");
  tls::ClientHelloInfo long_name;
  long_name.has_server_name = true;
  long_name.raw_server_name = std::string(200, 'a') + "\x01";
  std::string shown = connection::shown_server_name(long_name);
  CHECK(shown.size() == 64 + 5);
  CHECK(shown.substr(shown.size() - 4) == "...'");
  CHECK(connection::configured_names(sni_config(config::UnknownServerName::kRefuse)) ==
        "bootstrap 'kafka.example.com', brokers 'broker-$(nodeId).kafka.example.com'");
}

TEST_CASE("every outcome has its own counter series") {
  metrics::ProxyMetrics m;
  auto& counter = connection::sni_outcome_counter(m);
  CHECK(&connection::sni_outcome_counter(m) == &counter);  // made once per metrics
  CHECK(m.render().find("kproxy_proxy_sni_connections_total{outcome=\"timeout\"} 0") != std::string::npos);
  counter.add(static_cast<size_t>(SniOutcome::kTimeout));
  CHECK(counter.value(static_cast<size_t>(SniOutcome::kTimeout)) == 1);
  CHECK(counter.value(static_cast<size_t>(SniOutcome::kBroker)) == 0);
  CHECK(m.render().find("kproxy_proxy_sni_connections_total{outcome=\"timeout\"} 1") != std::string::npos);
  CHECK(std::string(connection::sni_outcome_name(SniOutcome::kNoNameRefused)) == "no_name_refused");
}

TEST_CASE("a name from elsewhere (a PROXY header's authority) routes the same way") {
  auto refuse = sni_config(config::UnknownServerName::kRefuse);
  CHECK(connection::route_by_name(refuse, std::string("kafka.example.com")).outcome == SniOutcome::kBootstrap);
  auto broker = connection::route_by_name(refuse, tls::normalize_server_name("BROKER-3.kafka.example.com."));
  CHECK(broker.outcome == SniOutcome::kBroker);
  CHECK(broker.node_id == 3);
  CHECK(connection::route_by_name(refuse, std::nullopt).outcome == SniOutcome::kNoNameRefused);
  CHECK(connection::route_by_name(refuse, tls::normalize_server_name("not a name")).outcome == SniOutcome::kNoNameRefused);
  CHECK(connection::route_by_name(refuse, std::string("x.example.com")).outcome == SniOutcome::kUnknownNameRefused);
}
