#include "proxy/admin/listener_routes.h"

#include <doctest/doctest.h>

using namespace kproxy;

TEST_CASE("GET /listeners shows bound addresses, advertised ones and the real brokers") {
  admin::ListenerSnapshot l;
  l.name = "kafka";
  l.bind_host = "127.0.0.1";
  l.port = 41234;
  l.advertise = "proxy.local";
  l.broker_ports = "kernel";
  l.brokers.push_back({1, config::HostPort{"10.0.0.1", 9092}, 41235, true});
  admin::ListenerSnapshot unbound;
  unbound.name = "west";
  unbound.bind_host = "::1";
  unbound.advertise = "::1";
  unbound.broker_ports = "node_id_offset";
  auto body = admin::listeners_json({l, unbound}, "127.0.0.1:9644");
  CHECK(body["admin"] == "127.0.0.1:9644");
  REQUIRE(body["listeners"].size() == 2);
  const auto& k = body["listeners"][0];
  CHECK(k["name"] == "kafka");
  CHECK(k["address"] == "127.0.0.1:41234");
  CHECK(k["broker_ports"] == "kernel");
  REQUIRE(k["brokers"].size() == 1);
  CHECK(k["brokers"][0]["node_id"] == 1);
  CHECK(k["brokers"][0]["address"] == "127.0.0.1:41235");
  CHECK(k["brokers"][0]["advertised"] == "proxy.local:41235");
  CHECK(k["brokers"][0]["broker"] == "10.0.0.1:9092");
  CHECK(k["brokers"][0]["listening"] == true);
  CHECK(body["listeners"][1]["address"].is_null());  // not bound yet
  CHECK(body["listeners"][1]["brokers"].empty());

  // A node with its own advertised address (`advertise: "1=host:port"`) shows that address.
  l.advertise_nodes = {{1, config::HostPort{"localhost", 32771}}};
  auto mapped = admin::listeners_json({l}, "127.0.0.1:9644");
  CHECK(mapped["listeners"][0]["brokers"][0]["advertised"] == "localhost:32771");
  CHECK(mapped["listeners"][0]["brokers"][0]["address"] == "127.0.0.1:41235");  // where kproxy listens for it
}
