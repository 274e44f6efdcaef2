#include "proxy/cluster/broker_directory.h"
#include "proxy/net/bound_socket.h"

#include <doctest/doctest.h>

using namespace kproxy;
using cluster::BrokerDirectory;

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

namespace {

// Two listeners in front of two clusters, as in config/examples/two-clusters.yaml.
config::Config two_clusters(config::BrokerPorts east, config::BrokerPorts west) {
  config::Config c;
  config::ListenerConfig a;
  a.name = "east";
  a.listen = {"127.0.0.1", 9092};
  a.broker_ports = east;
  config::ListenerConfig b;
  b.name = "west";
  b.listen = {"127.0.0.1", 9192};
  b.broker_ports = west;
  c.listeners = {a, b};
  c.admin.listen = config::HostPort{"127.0.0.1", 9644};
  return c;
}

config::BrokerPorts base(uint16_t port) {
  config::BrokerPorts p;
  p.base = port;
  return p;
}

config::BrokerPorts range(uint16_t first, uint16_t last) {
  config::BrokerPorts p;
  p.scheme = config::BrokerPorts::Scheme::kInOrder;
  p.first = first;
  p.last = last;
  return p;
}

/// The refusals counted in this file's metrics (the directories below are given its counter).
metrics::ProxyMetrics refusal_metrics;
metrics::LabelledCounter& refusals = cluster::broker_port_refusal_counter(refusal_metrics);
uint64_t refused(cluster::BrokerPortRefusal reason) { return refusals.value(static_cast<size_t>(reason)); }

}  // namespace

TEST_CASE("a base + node id port another listener owns is refused at discovery (issue #15 bug 4)") {
  using cluster::BrokerPortRefusal;
  auto config = two_clusters(base(9100), base(9200));
  auto claims = std::make_shared<cluster::BrokerPortClaims>(config);
  BrokerDirectory east(config.listeners[0].broker_ports, claims, 0, "east", "127.0.0.1", &refusals);
  BrokerDirectory west(config.listeners[1].broker_ports, claims, 1, "west", "127.0.0.1", &refusals);
  const uint64_t before = refused(BrokerPortRefusal::kClaimed);

  // West's node 0 takes 9200 first; east's node 100 (9100 + 100) would reach west's cluster.
  CHECK(west.learn(0, "west-0", 9092).proxy_port == 9200);
  auto clash = east.learn(100, "east-100", 9092);
  CHECK(clash.proxy_port == 0);
  CHECK_FALSE(clash.new_port);
  CHECK(clash.refused == "its port 9200 is broker node 0 of listener 'west'");
  CHECK(refused(BrokerPortRefusal::kClaimed) == before + 1);
  // Every later response naming the node is refused the same way, counted once.
  CHECK(east.learn(100, "east-100", 9092).proxy_port == 0);
  CHECK(refused(BrokerPortRefusal::kClaimed) == before + 1);
  CHECK_FALSE(east.route_for_port(9200).has_value());
  CHECK(west.route_for_port(9200)->real.host == "west-0");

  // Bootstrap ports and the admin API are claimed from the start.
  auto onto_bootstrap = east.learn(92, "east-92", 9092);  // 9100 + 92 = 9192, west's listen
  CHECK(onto_bootstrap.refused == "its port 9192 is the bootstrap port of listener 'west'");
  BrokerDirectory low(base(9600), claims, 0, "east", "127.0.0.1", &refusals);
  CHECK(low.learn(44, "x", 9092).refused == "its port 9644 is the admin API");
  CHECK(refused(BrokerPortRefusal::kClaimed) == before + 3);
  // A node of the listener itself keeps its port on every learn.
  CHECK(east.learn(1, "east-1", 9092).proxy_port == 9101);
  CHECK(east.learn(1, "east-1", 9092).proxy_port == 9101);
}

TEST_CASE("a base + node id port inside another listener's broker range is refused") {
  auto config = two_clusters(base(9100), range(9150, 9159));
  auto claims = std::make_shared<cluster::BrokerPortClaims>(config);
  BrokerDirectory east(config.listeners[0].broker_ports, claims, 0, "east", "127.0.0.1", &refusals);
  BrokerDirectory west(config.listeners[1].broker_ports, claims, 1, "west", "127.0.0.1", &refusals);
  CHECK(east.learn(55, "e", 9092).refused == "its port 9155 is the broker port range of listener 'west'");
  CHECK(west.learn(1001, "w", 9092).proxy_port == 9150);
  CHECK(west.learn(1002, "w2", 9092).proxy_port == 9151);
}

TEST_CASE("max_broker_ports caps the ports one listener opens") {
  using cluster::BrokerPortRefusal;
  config::BrokerPorts p = base(20000);
  p.max_ports = 3;
  BrokerDirectory d(p, nullptr, 0, {}, "127.0.0.1", &refusals);
  const uint64_t before = refused(BrokerPortRefusal::kOverLimit);
  for (int32_t node = 0; node < 3; ++node) CHECK(d.learn(node, "b", 9092).proxy_port == 20000 + node);
  for (int32_t node = 3; node < 50; ++node) {
    auto l = d.learn(node, "b", 9092);
    REQUIRE(l.proxy_port == 0);
    REQUIRE(l.refused == "this listener already gives max_broker_ports = 3 brokers a port");
  }
  CHECK(refused(BrokerPortRefusal::kOverLimit) == before + 47);
  CHECK(d.routes().size() == 3);
  // Known nodes keep their ports.
  CHECK(d.learn(2, "b2", 9092).proxy_port == 20002);
}

TEST_CASE("no port left: past 65535 or the range used up, with the reason") {
  using cluster::BrokerPortRefusal;
  const uint64_t before = refused(BrokerPortRefusal::kNoPort);
  BrokerDirectory high(base(65530), nullptr, 0, {}, "127.0.0.1", &refusals);
  CHECK(high.learn(6, "b", 9092).refused == "broker_ports base 65530 + node id 6 is past port 65535");
  BrokerDirectory small(range(9300, 9300), nullptr, 0, {}, "127.0.0.1", &refusals);
  CHECK(small.learn(1, "a", 9092).proxy_port == 9300);
  CHECK(small.learn(2, "b", 9092).refused == "broker_port_range 9300-9300 is used up");
  CHECK(refused(BrokerPortRefusal::kNoPort) == before + 2);
  CHECK(std::string(cluster::broker_port_refusal_name(BrokerPortRefusal::kClaimed)) == "claimed_by_other");
}

TEST_CASE("broker_ports: 0: the kernel picks each broker's port, bound before it is handed out (issue #30 item 7)") {
  config::BrokerPorts p;
  p.scheme = config::BrokerPorts::Scheme::kKernel;
  BrokerDirectory d(p, nullptr, 0, "unit", "127.0.0.1");
  auto a = d.learn(1, "10.0.0.1", 9092);
  auto b = d.learn(2, "10.0.0.2", 9092);
  REQUIRE(a.proxy_port != 0);
  REQUIRE(b.proxy_port != 0);
  CHECK(a.new_port);
  CHECK(a.proxy_port != b.proxy_port);
  // The port is held by a bound socket until the runtime takes it to listen on.
  net::OwnedDescriptor socket = d.take_reserved_socket(1);
  REQUIRE(socket);
  CHECK(net::local_port(socket.get()) == a.proxy_port);
  CHECK_FALSE(d.take_reserved_socket(1));  // handed over once
  CHECK_FALSE(d.take_reserved_socket(7));  // no such node
  // Known nodes keep their port; the route leads to the real broker.
  CHECK(d.learn(1, "10.0.0.1", 9092).proxy_port == a.proxy_port);
  CHECK(d.route_for_port(b.proxy_port)->real == config::HostPort{"10.0.0.2", 9092});
  d.opened(1);
  auto routes = d.routes();
  REQUIRE(routes.size() == 2);
  CHECK(routes[0].listening);
  CHECK_FALSE(routes[1].listening);
}

TEST_CASE("broker_ports: 0 on an address that cannot be bound refuses the node with the reason") {
  config::BrokerPorts p;
  p.scheme = config::BrokerPorts::Scheme::kKernel;
  BrokerDirectory d(p, nullptr, 0, "unit", "not-an-ip", &refusals);
  auto before = refused(cluster::BrokerPortRefusal::kNoPort);
  auto a = d.learn(1, "10.0.0.1", 9092);
  CHECK(a.proxy_port == 0);
  CHECK(a.refused == "no port could be bound: listen address 'not-an-ip' is not an IP address");
  CHECK(refused(cluster::BrokerPortRefusal::kNoPort) == before + 1);
}

TEST_CASE("an SNI listener: every node at the one advertised port, nothing to open, found by node id") {
  config::BrokerPorts ports;
  ports.scheme = config::BrokerPorts::Scheme::kSni;
  ports.base = 443;
  BrokerDirectory d(ports);
  auto a = d.learn(1, "10.0.0.1", 9092);
  auto b = d.learn(2, "10.0.0.2", 9092);
  CHECK(a.proxy_port == 443);
  CHECK(b.proxy_port == 443);
  CHECK_FALSE(a.new_port);
  CHECK_FALSE(d.learn(1, "10.0.0.1", 9092).new_port);  // asked again: still nothing to open
  CHECK(d.route_for_node(2)->real == config::HostPort{"10.0.0.2", 9092});
  CHECK_FALSE(d.route_for_node(3).has_value());
  CHECK_FALSE(d.route_for_port(443).has_value());  // no port stands for one broker
  auto routes = d.routes();
  REQUIRE(routes.size() == 2);
  CHECK(routes[0].listening);  // served by the listener's port
}
