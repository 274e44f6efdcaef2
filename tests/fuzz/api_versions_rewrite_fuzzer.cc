// Fuzz target: the ApiVersions rewrite (proxy/policy/api_versions_policy.h) on decoded responses.
//
// Input: [requested version][policy length n] then n policy bytes (groups of 4: selector, min,
// max, flags), then the ApiVersions response body. Flag bit 16 makes a feature entry (KIP-584)
// instead of an API entry; bit 32 scopes the entry to a client id glob that may or may not match
// the "" the rewrite runs with. The policy goes through parse_api_versions_policy as JSON (as the
// config and PUT /api-versions give it); the body is decoded with the v0 fallback, rewritten,
// and checked:
//   - no range is widened beyond the broker's, no range is empty, hidden APIs are gone;
//   - known APIs never go beyond the versions kproxy decodes (Produce keeps the broker's minimum);
//   - features: a supported range is only narrowed and never empty, a finalized level is only
//     lowered and never 0, hidden features are gone, FinalizedFeaturesEpoch is unchanged;
//   - the rewritten response round-trips, and a second rewrite changes nothing.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/api_versions.h"
#include "codec/generated/api_keys.h"
#include "proxy/policy/api_versions_policy.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int16_t requested = static_cast<int16_t>(fuzz::take_byte(data, size) % 8);
  size_t n = fuzz::take_byte(data, size) % 64;
  auto keys = codec::all_api_keys();
  nlohmann::json spec = nlohmann::json::array();
  for (size_t i = 0; i + 4 <= n && size >= 4; i += 4) {
    uint8_t a = fuzz::take_byte(data, size), lo = fuzz::take_byte(data, size), hi = fuzz::take_byte(data, size),
            fl = fuzz::take_byte(data, size);
    nlohmann::json e;
    if (fl & 16) {
      static const char* const kFeatures[] = {"transaction.version", "group.version", "share.version", "streams.version",
                                              "metadata.version"};
      e["feature"] = kFeatures[a % 5];
      if (fl & 1) e[(fl & 64) ? "supported_min" : "supported_max"] = static_cast<int>(lo % 6) - 1;
      if (fl & 2) e["max"] = static_cast<int>(hi % 6) - 1;
      if (fl & 4) e["hide"] = true;
      if (fl & 8) e["implied_apis"] = false;
    } else {
      if (fl & 8) e["api"] = static_cast<int>(keys[a % keys.size()]);
      else e["api"] = codec::api_name(keys[a % keys.size()]);
      if (fl & 1) e["min"] = static_cast<int>(lo % 24) - 2;
      if (fl & 2) e["max"] = static_cast<int>(hi % 24) - 2;
      if (fl & 4) e["hide"] = true;
    }
    if (fl & 32) e["client_id"] = (fl & 128) ? "*" : "legacy-*";
    spec.push_back(e);
  }
  std::string error;
  auto policy = policy::parse_api_versions_policy(spec, error);
  if (!policy) {
    fuzz::check(!error.empty(), "parse_api_versions_policy refused without a reason");
    policy = policy::ApiVersionsPolicy{};
  }

  codec::ApiVersionsResponse resp;
  int16_t at = codec::decode_api_versions_response(codec::Bytes(data, size), requested, resp, &error);
  if (at < 0) return 0;
  const codec::ApiVersionsResponse before = resp;
  bool changed = policy::rewrite_api_versions(resp, *policy);
  fuzz::check_round_trip(resp, at, [] { return std::make_unique<codec::ApiVersionsResponse>(); });
  if (!changed) {
    fuzz::check(fuzz::encode(resp, at, "unchanged") == fuzz::encode(before, at, "before"),
                "rewrite said unchanged but the response differs");
    return 0;
  }
  fuzz::check(before.error_code != 35, "an UNSUPPORTED_VERSION fallback body was rewritten");
  const int16_t produce = static_cast<int16_t>(codec::ApiKey::kProduce);
  // The output is the input minus removed entries, in order. A broker list may name a key twice,
  // so an output entry may stand for any later input entry with its key that the rules allow.
  size_t j = 0;
  for (const auto& out : resp.api_keys) {
    std::string label = "api " + std::to_string(out.api_key) + ": ";
    fuzz::check(out.min_version <= out.max_version, label + "empty range kept");
    if (codec::api_name(out.api_key) != nullptr) {
      fuzz::check(out.max_version <= codec::request_versions(out.api_key).max, label + "max beyond what kproxy decodes");
    }
    // The entry that applies: the first one for this API whose scope matches the client "".
    const policy::ApiVersionsPolicy::Entry* rule = nullptr;
    for (const auto& e : policy->apis)
      if (!rule && e.api == out.api_key && e.scope.matches("", "")) rule = &e;
    if (rule) {
      fuzz::check(!rule->hide, label + "hidden API still listed");
      if (rule->max) fuzz::check(out.max_version <= *rule->max, label + "policy max ignored");
    }
    bool found = false;
    for (; j < before.api_keys.size() && !found; ++j) {
      const auto& in = before.api_keys[j];
      if (in.api_key != out.api_key || out.max_version > in.max_version) continue;
      found = out.api_key == produce ? out.min_version == in.min_version : out.min_version >= in.min_version;
    }
    fuzz::check(found, label + "no broker entry it could come from (range widened, Produce minimum changed, or order changed)");
  }
  fuzz::check(resp.finalized_features_epoch == before.finalized_features_epoch, "FinalizedFeaturesEpoch changed");
  auto feature_rule = [&](std::string_view name) -> const policy::ApiVersionsPolicy::FeatureEntry* {
    for (const auto& e : policy->features)
      if (e.name == name && e.scope.matches("", "")) return &e;
    return nullptr;
  };
  for (const auto& f : resp.supported_features) {
    std::string label = "supported feature " + std::string(f.name) + ": ";
    auto rule = feature_rule(f.name);
    if (rule) {
      // (A feature the policy does not name is forwarded as the broker sent it, even min > max.)
      fuzz::check(f.min_version <= f.max_version, label + "empty range kept");
      fuzz::check(!rule->hide, label + "hidden feature still listed");
      if (rule->supported_max) fuzz::check(f.max_version <= *rule->supported_max, label + "supported_max ignored");
      if (rule->supported_min) fuzz::check(f.min_version >= *rule->supported_min, label + "supported_min ignored");
    }
    bool from_broker = false;
    for (const auto& in : before.supported_features)
      from_broker = from_broker || (in.name == f.name && in.min_version <= f.min_version && f.max_version <= in.max_version);
    fuzz::check(from_broker, label + "widened or invented");
  }
  for (const auto& f : resp.finalized_features) {
    std::string label = "finalized feature " + std::string(f.name) + ": ";
    auto rule = feature_rule(f.name);
    if (rule) {
      fuzz::check(!rule->hide, label + "hidden feature still listed");
      fuzz::check(f.max_version_level > 0, label + "level 0 listed");
      if (rule->max) fuzz::check(f.max_version_level <= *rule->max, label + "max ignored");
      fuzz::check(f.min_version_level <= f.max_version_level, label + "min level above max level");
    }
    bool from_broker = false;
    for (const auto& in : before.finalized_features)
      from_broker = from_broker || (in.name == f.name && f.max_version_level <= in.max_version_level);
    fuzz::check(from_broker, label + "raised or invented");
  }
  codec::ApiVersionsResponse again = resp;
  fuzz::check(!policy::rewrite_api_versions(again, *policy), "a second rewrite changed the response again");
  return 0;
}
