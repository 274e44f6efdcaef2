// Tests for proxy/chaos/yaml_number.h.
#include "proxy/chaos/yaml_number.h"

#include <doctest/doctest.h>

#include "proxy/chaos/config_sections.h"

using kproxy::chaos::yaml_number;

TEST_CASE("yaml_number: whole texts that spell a number") {
  CHECK(yaml_number("0") == 0.0);
  CHECK(yaml_number("250") == 250.0);
  CHECK(yaml_number("-3.5") == -3.5);
  CHECK(yaml_number("1e3") == 1000.0);
}

TEST_CASE("yaml_number: a value too small for a double is still a number (schemathesis seed 20261204)") {
  // JSON Schema reads 2.2250738585e-313 as a number in [0, 86400000]; strtod reports ERANGE for it.
  auto tiny = yaml_number("2.2250738585e-313");
  REQUIRE(tiny.has_value());
  CHECK(*tiny >= 0.0);
  CHECK(*tiny < 1e-300);
  CHECK(yaml_number("1e-400") == 0.0);
}

TEST_CASE("yaml_number: not a number") {
  CHECK_FALSE(yaml_number(""));
  CHECK_FALSE(yaml_number("250ms"));
  CHECK_FALSE(yaml_number("2s"));
  CHECK_FALSE(yaml_number("1e400"));  // infinity is no duration, count or id
  CHECK_FALSE(yaml_number("12 "));
}

TEST_CASE("a fault rule with a subnormal window.after loads as a window that opens at once") {
  kproxy::chaos::ChaosConfig chaos;
  auto error = kproxy::chaos::load_chaos_yaml(
      "faults:\n  - name: tiny\n    match: { api: EndTxn }\n    action: { error: NOT_COORDINATOR }\n    window: { after: 2.2250738585e-313 "
      "}\n",
      "tiny.yaml", chaos);
  CHECK_MESSAGE(error.empty(), error);
  CHECK(chaos.rules.size() == 1);
}
