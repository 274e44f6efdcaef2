#include "proxy/toxiproxy/toxic_spec.h"

#include <doctest/doctest.h>

#include "proxy/chaos/fault_rule.h"

using namespace kproxy::toxiproxy;

TEST_CASE("a toxic takes Toxiproxy's defaults: downstream, toxicity 1, name <type>_<stream>, attributes 0") {
  ApiError error;
  auto t = parse_toxic(R"({"type": "latency", "attributes": {"latency": 250}})", error);
  REQUIRE(t);
  CHECK(t->name == "latency_downstream");
  CHECK(t->stream == Stream::kDownstream);
  CHECK(t->toxicity == 1.0);
  CHECK(t->attribute("latency") == 250);
  CHECK(t->attribute("jitter") == 0);
  auto json = t->to_json();
  CHECK(json["stream"] == "downstream");
  CHECK(json["type"] == "latency");
  CHECK(json["attributes"]["jitter"] == 0);

  auto up = parse_toxic(R"({"type": "bandwidth", "stream": "upstream", "name": "slow", "toxicity": 0.25})", error);
  REQUIRE(up);
  CHECK(up->name == "slow");
  CHECK(up->stream == Stream::kUpstream);
  CHECK(up->toxicity == 0.25);
  CHECK(up->to_json()["attributes"]["rate"] == 0);
}

TEST_CASE("every Toxiproxy toxic type shows all its attributes") {
  ApiError error;
  struct Case {
    const char* type;
    std::vector<const char*> keys;
  };
  for (const auto& c : std::vector<Case>{{"latency", {"latency", "jitter"}},
                                         {"bandwidth", {"rate"}},
                                         {"slow_close", {"delay"}},
                                         {"timeout", {"timeout"}},
                                         {"reset_peer", {"timeout"}},
                                         {"slicer", {"average_size", "size_variation", "delay"}},
                                         {"limit_data", {"bytes"}}}) {
    CAPTURE(c.type);
    auto t = parse_toxic(std::string(R"({"type": ")") + c.type + "\"}", error);
    REQUIRE(t);
    CHECK(t->attributes.size() == c.keys.size());
    for (const char* k : c.keys) CHECK(t->attributes.contains(k));
  }
}

TEST_CASE("bad toxic bodies are refused with Toxiproxy's 400 messages") {
  ApiError error;
  CHECK_FALSE(parse_toxic("{", error));
  CHECK(error.status == 400);
  CHECK(error.message.rfind("bad request body", 0) == 0);

  CHECK_FALSE(parse_toxic(R"({"type": "latency", "stream": "sideways"})", error));
  CHECK(error.message == "stream was invalid, can be either upstream or downstream");

  CHECK_FALSE(parse_toxic(R"({"type": "nonsense"})", error));
  CHECK(error.message == "invalid toxic type");
  CHECK_FALSE(parse_toxic(R"({})", error));
  CHECK(error.message == "invalid toxic type");

  CHECK_FALSE(parse_toxic(R"({"type": "latency", "attributes": {"latency": "100ms"}})", error));
  CHECK(error.message.find("attributes.latency") != std::string::npos);
  CHECK_FALSE(parse_toxic(R"({"type": "latency", "attributes": {"latency": -1}})", error));
  CHECK_FALSE(parse_toxic(R"({"type": "latency", "attributes": {"latency": 1.5}})", error));
  CHECK_FALSE(parse_toxic(R"({"type": "latency", "attributes": [1]})", error));
  CHECK_FALSE(parse_toxic(R"({"type": "latency", "toxicity": 2})", error));
  CHECK(error.message.find("toxicity") != std::string::npos);
  CHECK_FALSE(parse_toxic(R"({"type": "latency", "toxicity": "all"})", error));
  CHECK_FALSE(parse_toxic(R"({"type": 5})", error));
  CHECK_FALSE(parse_toxic(R"([{"type": "latency"}])", error));
}

TEST_CASE("attributes a Toxiproxy type does not know are ignored, as Toxiproxy does") {
  ApiError error;
  auto t = parse_toxic(R"({"type": "timeout", "attributes": {"timeout": 5, "colour": "red"}})", error);
  REQUIRE(t);
  CHECK(t->attribute("timeout") == 5);
  CHECK_FALSE(t->attributes.contains("colour"));
}

TEST_CASE("Kafka toxics take their own attributes and refuse unknown ones") {
  ApiError error;
  CHECK(is_kafka_toxic("kafka_error"));
  CHECK_FALSE(is_kafka_toxic("latency"));
  auto t = parse_toxic(R"({"type": "kafka_error", "attributes": {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER",
                                                                  "client_id": "orders-*"}})",
                       error);
  REQUIRE(t);
  CHECK(t->name == "kafka_error_downstream");
  CHECK(t->attributes["api"] == "Produce");
  CHECK(t->attributes["error"] == "NOT_LEADER_OR_FOLLOWER");
  CHECK_FALSE(parse_toxic(R"({"type": "kafka_close", "attributes": {"colour": "red"}})", error));
  CHECK(error.status == 400);
  CHECK(error.message.find("attributes.colour") != std::string::npos);
  // What kproxy's rule parser refuses is a 400 too: an unknown API, an unknown error, no error.
  CHECK_FALSE(parse_toxic(R"({"type": "kafka_error", "attributes": {"api": "NoSuchApi", "error": "NOT_CONTROLLER"}})", error));
  CHECK(error.message.find("match.api") != std::string::npos);
  CHECK_FALSE(parse_toxic(R"({"type": "kafka_error", "attributes": {"api": "Produce", "error": "NO_SUCH_ERROR"}})", error));
  CHECK(error.message.find("action.error") != std::string::npos);
  CHECK_FALSE(parse_toxic(R"({"type": "kafka_error", "attributes": {"api": "Produce"}})", error));
  CHECK(parse_toxic(R"({"type": "kafka_delay", "attributes": {"api": "Fetch", "delay": "200ms"}})", error));
  CHECK(parse_toxic(R"({"type": "kafka_drop_response", "attributes": {"api": "Produce"}})", error));
  CHECK(parse_toxic(R"({"type": "kafka_close", "attributes": {"api": "Produce", "trigger": {"once": true}}})", error));
}

TEST_CASE("a Kafka toxic stands for a kproxy fault rule") {
  ApiError error;
  auto t = parse_toxic(R"({"type": "kafka_error", "toxicity": 0.25,
                          "attributes": {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "transactional_id": "orders-*"}})",
                       error);
  REQUIRE(t);
  auto rule = kafka_toxic_rule(*t, "toxi-k-1");
  CHECK(rule["name"] == "toxi-k-1");
  CHECK(rule["match"]["api"] == "Produce");
  CHECK(rule["match"]["transactional_id"] == "orders-*");
  CHECK(rule["action"]["error"] == "NOT_LEADER_OR_FOLLOWER");
  CHECK(rule["trigger"]["probability"] == 0.25);
  auto delay = parse_toxic(R"({"type": "kafka_delay", "stream": "upstream", "attributes": {"api": "Fetch", "delay": 150}})", error);
  REQUIRE(delay);
  CHECK(kafka_toxic_rule(*delay, "d")["action"]["side"] == "request");
  CHECK(kafka_toxic_rule(*delay, "d")["trigger"]["always"] == true);
  auto close = parse_toxic(R"({"type": "kafka_close", "attributes": {"api": "Produce"}})", error);
  REQUIRE(close);
  CHECK(kafka_toxic_rule(*close, "c")["action"]["close"] == "before");
  auto latency = parse_toxic(R"({"type": "latency"})", error);
  REQUIRE(latency);
  CHECK(kafka_toxic_rule(*latency, "l").is_null());
}

TEST_CASE("an update changes attributes and toxicity only, or nothing when refused") {
  ApiError error;
  auto t = parse_toxic(R"({"type": "latency", "name": "lag", "attributes": {"latency": 100, "jitter": 5}})", error);
  REQUIRE(t);
  CHECK(update_toxic(*t, R"({"attributes": {"latency": 300}, "toxicity": 0.5, "name": "other", "stream": "upstream"})", error));
  CHECK(t->attribute("latency") == 300);
  CHECK(t->attribute("jitter") == 5);  // kept
  CHECK(t->toxicity == 0.5);
  CHECK(t->name == "lag");
  CHECK(t->stream == Stream::kDownstream);
  CHECK_FALSE(update_toxic(*t, R"({"attributes": {"latency": -3}, "toxicity": 0.1})", error));
  CHECK(t->attribute("latency") == 300);
  CHECK(t->toxicity == 0.5);
  CHECK_FALSE(update_toxic(*t, "not json", error));
  CHECK(error.status == 400);
}

TEST_CASE("Toxiproxy's toxics on a Kafka-aware proxy are fault rules scoped to its listener") {
  auto rule_of = [](const std::string& body) {
    ApiError error;
    auto t = parse_toxic(body, error);
    REQUIRE_MESSAGE(t.has_value(), error.message);
    return proxy_toxic_rule(*t, "r", "toxiproxy-kafka");
  };
  auto latency = rule_of(R"({"type": "latency", "attributes": {"latency": 200, "jitter": 10}})");
  CHECK(latency["match"]["listener"] == "toxiproxy-kafka");
  CHECK(latency["action"]["delay"] == 200);
  CHECK(latency["action"]["jitter"] == 10);
  CHECK(latency["action"]["side"] == "response");
  auto up = rule_of(R"({"type": "latency", "stream": "upstream", "attributes": {"latency": 5}})");
  CHECK(up["action"]["side"] == "request");
  auto bw = rule_of(R"({"type": "bandwidth", "attributes": {"rate": 50}})");
  CHECK(bw["action"]["bandwidth"] == 50000);
  CHECK(bw["action"]["direction"] == "to_client");
  CHECK(rule_of(R"({"type": "reset_peer"})")["action"]["reset_after_bytes"] == 0);
  CHECK(rule_of(R"({"type": "timeout"})")["action"]["drop_response"] == true);
  CHECK(rule_of(R"({"type": "slow_close", "attributes": {"delay": 10}})").is_null());
  auto partial = rule_of(R"({"type": "latency", "toxicity": 0.5, "attributes": {"latency": 5}})");
  CHECK(partial["trigger"]["probability"] == 0.5);
  auto error = rule_of(R"({"type": "kafka_error", "attributes": {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}})");
  CHECK(error["match"]["api"] == "Produce");
  CHECK(error["match"]["listener"] == "toxiproxy-kafka");
  for (const auto& rule : {latency, up, bw, partial, error}) {
    std::string why;
    CHECK_MESSAGE(kproxy::chaos::parse_fault_rule(rule, why) != nullptr, why);
  }
}
