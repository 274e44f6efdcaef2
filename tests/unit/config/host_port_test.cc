#include "config/host_port.h"

#include <doctest/doctest.h>

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
