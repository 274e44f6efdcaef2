// Fuzz target: the admin API's JSON bodies, parsed and validated as the routes do
// (PUT/POST /faults → chaos::parse_fault_rule, PUT /api-versions → policy::parse_api_versions_policy).
//
// Properties: parsing never crashes or throws; a refusal always says why; an accepted rule's
// normalised spec parses again to the same spec (GET then PUT is a no-op), its JSON view dumps,
// and its trigger decides deterministically; an accepted policy's spec parses again.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "proxy/chaos/fault_rule.h"
#include "proxy/policy/api_versions_policy.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;

namespace {

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json body = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;

  std::string error;
  auto rule = chaos::parse_fault_rule(body, error);
  if (!rule) {
    fuzz::check(!error.empty(), "parse_fault_rule refused without a reason");
  } else {
    (void)dump(rule->to_json());
    std::string error2;
    auto again = chaos::parse_fault_rule(rule->spec, error2);
    fuzz::check(again != nullptr, "the normalised spec of an accepted rule is refused: " + error2 + "\n  spec " + dump(rule->spec));
    fuzz::check(again->spec == rule->spec,
                "normalising twice changes the spec\n  first  " + dump(rule->spec) + "\n  second " + dump(again->spec));
    for (uint64_t n = 1; n <= 8; ++n) {
      fuzz::check(rule->decide(n) == again->decide(n), "the same rule decides differently on hit " + std::to_string(n));
    }
    (void)rule->matches_header(0, 0, "listener", std::nullopt);
  }
  // PUT /faults/{name}: the name from the path overrides the body's.
  error.clear();
  auto named = chaos::parse_fault_rule(body, error, "from-path");
  if (named) fuzz::check(named->name == "from-path", "the path name does not override the body's");

  error.clear();
  auto policy = policy::parse_api_versions_policy(body, error);
  if (!policy) {
    fuzz::check(!error.empty(), "parse_api_versions_policy refused without a reason");
  } else {
    std::string error2;
    auto again = policy::parse_api_versions_policy(policy->spec, error2);
    fuzz::check(again.has_value(), "the spec of an accepted api-versions policy is refused: " + error2);
  }

  // Durations and globs as rules use them.
  (void)chaos::parse_duration(body);
  if (body.is_string()) {
    const std::string& s = body.get_ref<const std::string&>();
    if (chaos::glob_error(s).empty()) (void)chaos::glob_match(s, s);
  }
  return 0;
}
