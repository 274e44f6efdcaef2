#include "config/sni_config.h"

#include <doctest/doctest.h>

#include <string>

using namespace kproxy::config;

TEST_CASE("a broker host pattern renders each node's name and finds the node of a name") {
  std::string why;
  auto p = BrokerHostPattern::make("broker-$(nodeId).kafka.example.com", &why);
  REQUIRE_MESSAGE(p.has_value(), why);
  CHECK(p->render(0) == "broker-0.kafka.example.com");
  CHECK(p->render(300) == "broker-300.kafka.example.com");
  CHECK(p->match("broker-3.kafka.example.com") == 3);
  CHECK(p->match("broker-2147483647.kafka.example.com") == 2147483647);
  CHECK(p->match(p->render(100)) == 100);
  CHECK(p->text() == "broker-$(nodeId).kafka.example.com");
}

TEST_CASE("names a broker pattern does not match") {
  auto p = BrokerHostPattern::make("broker-$(nodeId).kafka.example.com", nullptr);
  REQUIRE(p.has_value());
  CHECK_FALSE(p->match("kafka.example.com"));
  CHECK_FALSE(p->match("broker-.kafka.example.com"));             // no id
  CHECK_FALSE(p->match("broker-x.kafka.example.com"));            // not a number
  CHECK_FALSE(p->match("broker-07.kafka.example.com"));           // a second name for node 7
  CHECK_FALSE(p->match("broker--7.kafka.example.com"));           // negative
  CHECK_FALSE(p->match("broker-+7.kafka.example.com"));           // signed
  CHECK_FALSE(p->match("broker-1.kafka.example.com.evil"));       // suffix must end the name
  CHECK_FALSE(p->match("xbroker-1.kafka.example.com"));           // prefix must start it
  CHECK_FALSE(p->match("broker-99999999999.kafka.example.com"));  // past int32
  CHECK_FALSE(p->match("broker-1.2.kafka.example.com"));
  CHECK(p->match("broker-0.kafka.example.com") == 0);
}

TEST_CASE("a pattern at the start or the end of the name") {
  auto front = BrokerHostPattern::make("$(nodeId).brokers.local", nullptr);
  REQUIRE(front.has_value());
  CHECK(front->match("12.brokers.local") == 12);
  CHECK_FALSE(front->match(".brokers.local"));
  auto back = BrokerHostPattern::make("kafka-$(nodeId)", nullptr);
  REQUIRE(back.has_value());
  CHECK(back->match("kafka-5") == 5);
  CHECK_FALSE(back->match("kafka-5.local"));
}

TEST_CASE("patterns without exactly one $(nodeId), or with another placeholder, are refused with a reason") {
  std::string why;
  CHECK_FALSE(BrokerHostPattern::make("broker.kafka.example.com", &why));
  CHECK(why.find("no $(nodeId)") != std::string::npos);
  CHECK_FALSE(BrokerHostPattern::make("b-$(nodeId)-$(nodeId).example.com", &why));
  CHECK(why.find("more than once") != std::string::npos);
  CHECK_FALSE(BrokerHostPattern::make("b-$(nodeId).$(rack).example.com", &why));
  CHECK(why.find("placeholder") != std::string::npos);
}

TEST_CASE("$(listener) is replaced wherever it appears") {
  CHECK(replace_listener_placeholder("broker-$(nodeId).$(listener).example.com", "east") == "broker-$(nodeId).east.example.com");
  CHECK(replace_listener_placeholder("$(listener)-$(listener)", "a") == "a-a");
  CHECK(replace_listener_placeholder("plain.example.com", "a") == "plain.example.com");
}

TEST_CASE("address literals: IPv4, IPv6 with or without brackets; host names are not") {
  CHECK(is_address_literal("10.0.0.1"));
  CHECK(is_address_literal("::1"));
  CHECK(is_address_literal("[2001:db8::7]"));
  CHECK_FALSE(is_address_literal("broker-1.example.com"));
  CHECK_FALSE(is_address_literal("10.0.0"));
  CHECK_FALSE(is_address_literal(""));
}
