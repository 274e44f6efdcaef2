#include "proxy/chaos/scenario.h"

#include <string>

#include <doctest/doctest.h>

using kproxy::chaos::ChaosConfig;
using kproxy::chaos::Scenario;

namespace {
std::string errors_of(const std::string& yaml) {
  Scenario s;
  return kproxy::chaos::load_scenario_yaml(yaml, "s.yaml", s);
}
}  // namespace

TEST_CASE("scenario: metadata, rules and policy from one file") {
  Scenario s;
  std::string e = kproxy::chaos::load_scenario_yaml(R"(scenario: 03-concurrent-transactions-endtxn
version: 2
number: 3
description: "EndTxn answered CONCURRENT_TRANSACTIONS twice"
protocols: [1, 2]
expect: exact
workload: producer
faults:
  - name: endtxn-busy
    match: { api: EndTxn }
    action: { answer: CONCURRENT_TRANSACTIONS }
    trigger: { times: 2 }
api_versions:
  - { feature: transaction.version, max: 1 }
)",
                                                    "s.yaml", s);
  CHECK(e == "");
  CHECK(s.name == "03-concurrent-transactions-endtxn");
  CHECK(s.version == 2);
  CHECK(s.number == 3);
  CHECK(s.protocols == std::vector<int>{1, 2});
  CHECK(s.expect == "exact");
  REQUIRE(s.chaos.rules.size() == 1);
  CHECK(s.chaos.rules[0]->name == "endtxn-busy");
  CHECK(s.chaos.api_versions.features.size() == 1);
  auto summary = s.summary();
  CHECK(summary["rules"] == nlohmann::json::array({"endtxn-busy"}));
  CHECK(summary["number"] == 3);
}

TEST_CASE("scenario: errors name the file, line and column, and the key") {
  CHECK(errors_of("description: x\nfaults: [{name: a, action: {delay: 1ms}}]\n").find("s.yaml: scenario: missing") == 0);
  CHECK(errors_of("scenario: 'a b'\ndescription: x\nfaults: [{name: a, action: {delay: 1ms}}]\n").find("s.yaml:1:11: scenario: a name") ==
        0);
  CHECK(errors_of("scenario: a\ndescription: x\nprotocols: [3]\nfaults: [{name: a, action: {delay: 1ms}}]\n")
            .find("s.yaml:3:12: protocols:") == 0);
  CHECK(errors_of("scenario: a\ndescription: x\nexpect: maybe\nfaults: [{name: a, action: {delay: 1ms}}]\n").find("s.yaml:3:9: expect:") ==
        0);
  CHECK(errors_of("scenario: a\ndescription: x\nfautls: []\n").find("s.yaml:3:1: fautls: unknown key") == 0);
  CHECK(errors_of("scenario: a\ndescription: x\n") == "");  // a baseline: nothing injected
  // The rules' own errors keep their positions (the config's parser).
  CHECK(errors_of("scenario: a\ndescription: x\nfaults:\n  - name: r\n    match: { api: EndTxnn }\n    action: { error: 51 }\n")
            .find("s.yaml:5:") == 0);
  CHECK(errors_of("[1, 2]").find("a scenario is a mapping") != std::string::npos);
  CHECK(errors_of("scenario: [").find("s.yaml: ") == 0);  // YAML syntax error, no crash
}

TEST_CASE("scenario: applied on top of the config's rules and policy") {
  ChaosConfig base;
  REQUIRE(kproxy::chaos::load_chaos_yaml("faults: [{name: cfg, action: {delay: 1ms}}]\napi_versions: [{api: Produce, max: 9}]\n", "c.yaml",
                                         base) == "");
  Scenario s;
  REQUIRE(kproxy::chaos::load_scenario_yaml("scenario: s\ndescription: x\nfaults: [{name: scn, action: {delay: 2ms}}]\n"
                                            "api_versions: [{api: Produce, max: 8}]\n",
                                            "s.yaml", s) == "");
  ChaosConfig merged = base;
  CHECK(kproxy::chaos::apply_scenario(merged, s, 1000) == "");
  REQUIRE(merged.rules.size() == 2);
  CHECK(merged.rules[1]->name == "scn");
  REQUIRE(merged.api_versions.apis.size() == 2);
  CHECK(merged.api_versions.apis[0].max == 8);  // the scenario's entry comes first: it applies
  CHECK(merged.api_versions.spec.size() == 2);
  // A scenario rule named like a config rule, or too many rules, is refused.
  Scenario clash;
  REQUIRE(kproxy::chaos::load_scenario_yaml("scenario: c\ndescription: x\nfaults: [{name: cfg, action: {delay: 2ms}}]\n", "s.yaml",
                                            clash) == "");
  ChaosConfig again = base;
  CHECK(kproxy::chaos::apply_scenario(again, clash, 1000).find("has the name of a rule of the config") != std::string::npos);
  ChaosConfig small = base;
  CHECK(kproxy::chaos::apply_scenario(small, s, 1).find("more than limits.max_fault_rules (1)") != std::string::npos);
}

TEST_CASE("scenario: workload is a word or the runner's settings") {
  Scenario word, settings;
  CHECK(kproxy::chaos::load_scenario_yaml("scenario: a\ndescription: x\nworkload: none\n", "s.yaml", word) == "");
  CHECK(word.summary()["workload"] == "none");
  CHECK(kproxy::chaos::load_scenario_yaml("scenario: a\ndescription: x\nworkload: { cell_timeout_s: 150 }\n", "s.yaml", settings) == "");
  CHECK(settings.summary()["workload"]["cell_timeout_s"] == "150");
  CHECK(errors_of("scenario: a\ndescription: x\nworkload: [1]\n").find("s.yaml:3:11: workload:") == 0);
}

TEST_CASE("scenario: JSON bodies yaml-cpp cannot read are read as JSON; null lists are refused") {
  Scenario s;
  // A surrogate pair escape: valid JSON, refused by yaml-cpp.
  CHECK(kproxy::chaos::load_scenario_yaml(R"({"scenario": "u", "description": "\uD83D\uDE00 fenced"})", "PUT /scenario", s) == "");
  CHECK(s.description == "\xF0\x9F\x98\x80 fenced");
  CHECK(errors_of("scenario: a\ndescription: x\napi_versions: null\n").find("s.yaml:3:15: api_versions: expected a list") == 0);
  CHECK(errors_of(R"({"scenario": "a", "description": "x", "faults": {}})").find("faults: expected a list") != std::string::npos);
}

TEST_CASE("scenario: numbers as JSON Schema reads them, text that is text") {
  Scenario s;
  CHECK(kproxy::chaos::load_scenario_yaml(R"({"scenario": "a", "description": "x", "version": 3.0, "protocols": [2.0]})", "s.json", s) ==
        "");
  CHECK(s.version == 3);
  CHECK(s.protocols == std::vector<int>{2});
  CHECK(errors_of(R"({"scenario": "a", "description": "x", "notes": false})").find("notes: text") != std::string::npos);
  CHECK(errors_of(R"({"scenario": 12, "description": "x"})").find("scenario: a name") != std::string::npos);
  CHECK(errors_of(R"({"scenario": "a", "description": "x", "version": "3"})").find("version: a whole number") != std::string::npos);
  CHECK(errors_of(R"({"scenario": "a", "description": ""})").find("description: one line of text (1 to 1000") != std::string::npos);
  CHECK(errors_of("scenario: a\ndescription: " + std::string(1001, 'x') + "\n").find("description: one line") != std::string::npos);
  std::string thousand_wide;  // 1000 characters of three bytes each: within maxLength
  for (int i = 0; i < 1000; ++i) thousand_wide += "\xE2\x82\xAC";
  CHECK(errors_of("scenario: a\ndescription: " + thousand_wide + "\n") == "");
  CHECK(errors_of("scenario: a\ndescription: 2.5\n").find("description: one line of text") != std::string::npos);
}
