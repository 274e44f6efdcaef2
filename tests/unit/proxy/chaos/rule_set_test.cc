#include "proxy/chaos/rule_set.h"

#include <doctest/doctest.h>

#include "proxy/chaos/config_sections.h"

using namespace kproxy::chaos;
using nlohmann::json;

TEST_CASE("put, replace, delete, reset; counters survive an unchanged put") {
  LiveRules c;
  auto g0 = c.generation();
  CHECK(c.put_rule("a", json::parse(R"({"match":{"api":"EndTxn"},"action":{"error":"NOT_COORDINATOR"},"trigger":{"times":1}})")) == "");
  CHECK(c.generation() > g0);
  auto rule = c.rule("a");
  REQUIRE(rule);
  CHECK(c.current()->may_match(26));
  CHECK(!c.current()->may_match(0));
  rule->fire(std::chrono::steady_clock::now());
  CHECK(c.put_rule("a", json::parse(R"({"match":{"api":"EndTxn"},"action":{"error":"NOT_COORDINATOR"},"trigger":{"times":1}})")) == "");
  CHECK(c.rule("a")->stats->hits == 1);
  CHECK(c.put_rule("a", json::parse(R"({"match":{"api":"EndTxn"},"action":{"error":"NOT_COORDINATOR"},"trigger":{"times":2}})")) == "");
  CHECK(c.rule("a")->stats->hits == 0);
  CHECK(c.put_rule("b", json::parse(R"({"match":{"api":"Nope"},"action":{"error":16}})")) != "");
  CHECK(c.current()->rules.size() == 1);
  auto counters = c.counters();
  REQUIRE(counters.size() == 1);
  CHECK(counters[0].apis == std::vector<std::string>{"EndTxn"});
  CHECK(counters[0].action == "error");
  CHECK(c.delete_rule("a"));
  CHECK(!c.delete_rule("a"));
  c.put_rule("x", json::parse(R"({"action":{"drop_response":true}})"));
  CHECK(c.current()->may_match(0));
  c.reset_rules();
  CHECK(c.current()->rules.empty());
}

TEST_CASE("config sections: rules from YAML with file:line errors") {
  ChaosConfig out;
  auto errors = load_chaos_yaml(R"(listeners: []
api_versions:
  - { api: Produce, max: 9 }
faults:
  - name: fence-orders
    match:   { api: AddPartitionsToTxn, transactional_id: "orders-*" }
    action:  { error: PRODUCER_FENCED }
    trigger: { times: 1 }
  - name: slow
    match: { api: [EndTxn, 25] }
    action: { delay: 200ms, jitter: 20ms }
)",
                                "k.yaml", out);
  CHECK(errors == "");
  REQUIRE(out.rules.size() == 2);
  CHECK(out.rules[0]->match.transactional_id == "orders-*");
  CHECK(out.rules[1]->action.delay.count() == 200);
  CHECK(out.api_versions.apis.at(0).max == 9);

  ChaosConfig bad;
  errors = load_chaos_yaml(R"(faults:
  - name: a
    match: { api: EndTxnn }
    action: { error: NOT_COORDINATOR }
  - name: b
    action: { drop_response: true }
  - name: b
    action: { drop_response: true }
api_versions:
  - { api: Produce, max: x }
)",
                           "k.yaml", bad);
  INFO(errors);
  CHECK(errors.find("k.yaml:3:14: faults[0].match.api: unknown API 'EndTxnn'") != std::string::npos);
  CHECK(errors.find("k.yaml:7:5: faults[2].name: 'b' is used") != std::string::npos);
  CHECK(errors.find("k.yaml:10:21: api_versions[0].max") != std::string::npos);
}

TEST_CASE("put_rule: a new rule past max_rules is refused, a replacement is not") {
  LiveRules c;
  const auto spec = json::parse(R"({"action":{"drop_response":true}})");
  CHECK(c.put_rule("a", spec, 2) == "");
  CHECK(c.put_rule("b", spec, 2) == "");
  auto g = c.generation();
  CHECK(c.put_rule("c", spec, 2) == "too many fault rules: 2 installed, at most 2 (limits.max_fault_rules); delete some first");
  CHECK(c.generation() == g);  // nothing changed
  CHECK(c.current()->rules.size() == 2);
  CHECK(c.put_rule("b", json::parse(R"({"action":{"close":"after"}})"), 2) == "");
  CHECK(c.rule("b")->action.kind == ActionKind::kClose);
  CHECK(c.delete_rule("a"));
  CHECK(c.put_rule("c", spec, 2) == "");
}
