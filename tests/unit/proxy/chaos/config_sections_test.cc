// Tests for proxy/chaos/config_sections.h: the api_versions: section's feature entries and their
// file:line:column errors, and the faults: cap (limits.max_fault_rules); the faults: rules
// themselves are covered in rule_set_test.cc.
#include "proxy/chaos/config_sections.h"

#include <doctest/doctest.h>

using namespace kproxy::chaos;

TEST_CASE("api_versions: feature entries with scopes, as written in a config file") {
  ChaosConfig out;
  auto errors = load_chaos_yaml(R"(api_versions:
  - { feature: transaction.version, max: 1, client_id: "legacy-*" }
  - feature: group.version
    hide: true
    listener: plain
  - { api: Produce, max: 12, client_id: "legacy-*" }
)",
                                "k.yaml", out);
  CHECK(errors == "");
  REQUIRE(out.api_versions.features.size() == 2);
  CHECK(out.api_versions.features[0].name == "transaction.version");
  CHECK(out.api_versions.features[0].max == 1);
  CHECK(out.api_versions.features[0].scope.client_id == "legacy-*");
  CHECK(out.api_versions.features[0].implied_apis);
  CHECK(out.api_versions.features[1].hide);
  CHECK(out.api_versions.features[1].scope.listener == "plain");
  REQUIRE(out.api_versions.apis.size() == 1);
  CHECK(out.api_versions.apis[0].max == 12);
}

TEST_CASE("api_versions: a bad feature entry is refused at its file:line:column") {
  ChaosConfig bad;
  auto errors = load_chaos_yaml(R"(api_versions:
  - { feature: transaction.version, max: 1 }
  - feature: group.version
    levl: 0
)",
                                "k.yaml", bad);
  CHECK(errors.rfind("k.yaml:4:5: api_versions[1].levl: unknown key (expected feature, max, supported_min, supported_max, hide, "
                     "implied_apis, listener, client_id)",
                     0) == 0);
  CHECK(bad.api_versions.features.empty());

  ChaosConfig dup;
  errors = load_chaos_yaml(R"(api_versions:
  - { feature: transaction.version, max: 1 }
  - { feature: transaction.version, max: 0 }
)",
                           "k.yaml", dup);
  CHECK(errors == "");  // the second entry never applies: accepted, and said as a warning when installed
  CHECK(dup.api_versions.shadowed.size() == 1);

  ChaosConfig level;
  errors = load_chaos_yaml("api_versions:\n  - { feature: share.version, max: -2 }\n", "k.yaml", level);
  CHECK(errors.rfind("k.yaml:2:31: api_versions[0].max: expected an integer from 0 to 32767, got -2", 0) == 0);

  ChaosConfig scalar;
  errors = load_chaos_yaml("api_versions: transaction.version\n", "k.yaml", scalar);
  CHECK(errors.rfind("k.yaml:1:15: api_versions: expected a list", 0) == 0);
}

TEST_CASE("config sections: more faults than limits.max_fault_rules are refused with the section's line") {
  kproxy::config::Config config;
  config.faults.yaml = "- name: a\n  action: { drop_response: true }\n- name: b\n  action: { drop_response: true }\n";
  config.faults.line = 7;
  config.limits.max_fault_rules = 1;
  ChaosConfig out;
  CHECK(load_chaos_config(config, out) == "<config>:7:1: faults: 2 rules, more than limits.max_fault_rules (1)\n");
  config.limits.max_fault_rules = 2;
  ChaosConfig ok;
  CHECK(load_chaos_config(config, ok) == "");
}
