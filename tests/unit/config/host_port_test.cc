#include "config/host_port.h"

#include <doctest/doctest.h>

#include <map>

using namespace kproxy::config;

TEST_CASE("host:port parsing") {
  std::string why;
  CHECK(parse_host_port("broker-1:9092", &why) == HostPort{"broker-1", 9092});
  CHECK(parse_host_port("[::1]:9092", &why) == HostPort{"::1", 9092});
  CHECK(parse_host_port("[::1]:9092", &why)->to_string() == "[::1]:9092");
  CHECK(parse_host_port("a:1", &why)->to_string() == "a:1");
  CHECK_FALSE(parse_host_port("broker", &why));
  CHECK(why.find("expected host:port") != std::string::npos);
  CHECK_FALSE(parse_host_port(":9092", &why));
  CHECK_FALSE(parse_host_port("b:0", &why));
  CHECK(parse_host_port("b:0", &why, /*allow_port_zero=*/true)->port == 0);
  CHECK_FALSE(parse_host_port("b:65536", &why));
  CHECK_FALSE(parse_host_port("b:9x", &why));
  CHECK_FALSE(parse_host_port("::1:9092", &why));
  CHECK(why.find("[addr]:port") != std::string::npos);
  CHECK_FALSE(parse_host_port("[::1", &why));
  CHECK_FALSE(parse_host_port("[::1]9092", &why));
}

TEST_CASE("wildcard hosts") {
  CHECK(is_wildcard_host("0.0.0.0"));
  CHECK(is_wildcard_host("::"));
  CHECK(is_wildcard_host(""));
  CHECK_FALSE(is_wildcard_host("127.0.0.1"));
}

TEST_CASE("advertise: a host and/or node=host:port items") {
  std::string why;
  auto host = parse_advertise("proxy.example", &why);
  REQUIRE(host);
  CHECK(host->host == "proxy.example");
  CHECK(host->nodes.empty());
  auto nodes = parse_advertise("1=localhost:32771, 2=localhost:32772", &why);
  REQUIRE(nodes);
  CHECK(nodes->host.empty());
  CHECK(nodes->nodes == std::map<int32_t, HostPort>{{1, {"localhost", 32771}}, {2, {"localhost", 32772}}});
  auto both = parse_advertise("gw.example,0=[::1]:9000", &why);
  REQUIRE(both);
  CHECK(both->host == "gw.example");
  CHECK(both->nodes.at(0) == HostPort{"::1", 9000});
  CHECK(parse_advertise("[::1]", &why)->host == "[::1]");

  CHECK_FALSE(parse_advertise("localhost:32771", &why));
  CHECK(why.find("needs a node id") != std::string::npos);
  CHECK_FALSE(parse_advertise("1=localhost:99999", &why));
  CHECK(why.find("node 1: 'localhost:99999': port must be a number from 1 to 65535") != std::string::npos);
  CHECK_FALSE(parse_advertise("1=localhost:0", &why));
  CHECK_FALSE(parse_advertise("x=localhost:1", &why));
  CHECK(why.find("node id must be a number") != std::string::npos);
  CHECK_FALSE(parse_advertise("-1=localhost:1", &why));
  CHECK_FALSE(parse_advertise("1=localhost:1,1=localhost:2", &why));
  CHECK(why.find("node 1 is given twice") != std::string::npos);
  CHECK_FALSE(parse_advertise("1=0.0.0.0:1", &why));
  CHECK(why.find("cannot be handed to clients") != std::string::npos);
  CHECK_FALSE(parse_advertise("a,b", &why));
  CHECK(why.find("more than one host") != std::string::npos);
  CHECK_FALSE(parse_advertise("1=a:1,", &why));
  CHECK(why.find("an empty item") != std::string::npos);
  CHECK_FALSE(parse_advertise("", &why));
  CHECK_FALSE(parse_advertise("0.0.0.0", &why));
}
