#include "proxy/broker_directory.h"

#include <doctest/doctest.h>

using namespace kproxy;
using proxy::BrokerDirectory;

TEST_CASE("base + node id") {
  config::BrokerPorts p;
  p.base = 9100;
  BrokerDirectory d(p);
  auto a = d.learn(3, "10.0.0.3", 9092);
  CHECK(a.proxy_port == 9103);
  CHECK(a.new_port);
  // Until a listener is open, every response naming the node asks for one again.
  CHECK(d.open_failed(3) == 1);
  CHECK(d.learn(3, "10.0.0.3", 9092).new_port);
  CHECK(d.open_failed(3) == 2);
  CHECK(d.opened(3) == 2);
  CHECK(d.open_failed(3) == 2);  // a late failure of another worker changes nothing
  auto again = d.learn(3, "10.0.0.3", 9092);
  CHECK(again.proxy_port == 9103);
  CHECK_FALSE(again.new_port);
  // A broker that moved: same port, new real address.
  d.learn(3, "10.0.0.33", 9094);
  CHECK(d.route_for_port(9103)->real == config::HostPort{"10.0.0.33", 9094});
  CHECK_FALSE(d.route_for_port(9104).has_value());
  // A known node named with a port outside 0-65535 is refused, and its address stays as it was.
  CHECK(d.learn(3, "10.0.0.34", 70000).proxy_port == 0);
  CHECK(d.route_for_port(9103)->real == config::HostPort{"10.0.0.33", 9094});
  CHECK(d.learn(-1, "x", 1).proxy_port == 0);
  CHECK(d.learn(70000, "x", 1).proxy_port == 0);
  CHECK(BrokerDirectory::offset_port(65535, 1) == 0);
  CHECK(d.routes().size() == 1);
}

TEST_CASE("assigned in order of discovery") {
  config::BrokerPorts p;
  p.scheme = config::BrokerPorts::Scheme::kInOrder;
  p.first = 9200;
  p.last = 9201;
  BrokerDirectory d(p);
  CHECK(d.learn(1001, "a", 9092).proxy_port == 9200);
  CHECK(d.learn(7, "b", 9092).proxy_port == 9201);
  CHECK(d.learn(1001, "a", 9092).proxy_port == 9200);
  CHECK(d.learn(8, "c", 9092).proxy_port == 0);  // range exhausted
  CHECK(d.route_for_port(9201)->node_id == 7);
}
