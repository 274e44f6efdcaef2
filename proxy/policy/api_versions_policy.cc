#include "proxy/policy/api_versions_policy.h"

#include <algorithm>

#include "codec/generated/api_keys.h"
#include "codec/generated/error_code.h"
#include "codec/response_header.h"

namespace kproxy::policy {

namespace {
constexpr auto kProduce = static_cast<int16_t>(codec::ApiKey::kProduce);
constexpr auto kApiVersions = static_cast<int16_t>(codec::ApiKey::kApiVersions);
constexpr auto kUnsupportedVersion = static_cast<int16_t>(codec::ErrorCode::kUnsupportedVersion);
}  // namespace

std::optional<ApiVersionsPolicy> parse_api_versions_policy(const nlohmann::json& list, std::string& error) {
  ApiVersionsPolicy policy;
  if (list.is_null()) return policy;
  if (!list.is_array()) {
    error = "expected a list of {api, min, max, hide}";
    return std::nullopt;
  }
  policy.spec = list;
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& e = list[i];
    std::string at = "[" + std::to_string(i) + "]";
    if (!e.is_object()) {
      error = at + ": expected {api, min, max, hide}";
      return std::nullopt;
    }
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (it.key() != "api" && it.key() != "min" && it.key() != "max" && it.key() != "hide") {
        error = at + "." + it.key() + ": unknown key (expected api, min, max, hide)";
        return std::nullopt;
      }
    }
    std::optional<int16_t> key;
    if (e.contains("api") && e["api"].is_string()) key = codec::api_key_for_name(e["api"].get<std::string>());
    else if (e.contains("api") && e["api"].is_number_integer() && codec::api_name(static_cast<int16_t>(e["api"].get<int>()))) key = static_cast<int16_t>(e["api"].get<int>());
    if (!key) {
      error = at + ".api: " + (e.contains("api") ? "unknown API " + e["api"].dump() : std::string("missing"));
      return std::nullopt;
    }
    if (*key == kApiVersions && e.contains("hide")) {
      error = at + ".hide: ApiVersions cannot be hidden (clients need it to negotiate)";
      return std::nullopt;
    }
    ApiVersionsPolicy::Entry entry;
    for (const char* k : {"min", "max"}) {
      if (!e.contains(k)) continue;
      if (!e[k].is_number_integer() || e[k].get<int64_t>() < 0 || e[k].get<int64_t>() > 0x7fff) {
        error = at + "." + k + ": expected a version >= 0";
        return std::nullopt;
      }
      (std::string(k) == "min" ? entry.min : entry.max) = static_cast<int16_t>(e[k].get<int>());
    }
    if (entry.min && entry.max && *entry.min > *entry.max) {
      error = at + ": min " + std::to_string(*entry.min) + " > max " + std::to_string(*entry.max);
      return std::nullopt;
    }
    if (e.contains("hide")) {
      if (!e["hide"].is_boolean()) {
        error = at + ".hide: expected true or false";
        return std::nullopt;
      }
      entry.hide = e["hide"].get<bool>();
    }
    if (!entry.hide && !entry.min && !entry.max) {
      error = at + ": give min, max or hide";
      return std::nullopt;
    }
    policy.apis[*key] = entry;
  }
  return policy;
}

bool rewrite_api_versions(codec::ApiVersionsResponse& response, const ApiVersionsPolicy& policy) {
  if (response.error_code == kUnsupportedVersion) return false;  // v0 fallback body: the client retries lower
  bool changed = false;
  std::vector<codec::ApiVersionsResponse::ApiVersion> kept;
  kept.reserve(response.api_keys.size());
  for (auto entry : response.api_keys) {
    int16_t min = entry.min_version, max = entry.max_version;
    auto known = codec::api_name(entry.api_key) != nullptr;
    if (known) {
      // Never advertise what kproxy cannot decode (docs/protocol.md "What kproxy advertises").
      auto codec_range = codec::request_versions(entry.api_key);
      max = std::min(max, codec_range.max);
      if (entry.api_key != kProduce) min = std::max(min, codec_range.min);
    }
    auto it = policy.apis.find(entry.api_key);
    bool hide = false;
    if (it != policy.apis.end()) {
      hide = it->second.hide;
      if (it->second.max) max = std::min(max, *it->second.max);
      // Produce keeps the broker's minimum (KAFKA-18659); others are only ever raised.
      if (it->second.min && entry.api_key != kProduce) min = std::max(min, *it->second.min);
    }
    if (hide || min > max) {
      changed = true;
      continue;
    }
    if (min != entry.min_version || max != entry.max_version) {
      entry.min_version = min;
      entry.max_version = max;
      changed = true;
    }
    kept.push_back(entry);
  }
  if (changed) response.api_keys = std::move(kept);
  return changed;
}

std::vector<uint8_t> unsupported_api_versions_frame(int32_t correlation_id) {
  codec::ApiVersionsResponse r;
  r.error_code = kUnsupportedVersion;
  codec::ApiVersionsResponse::ApiVersion v;
  v.api_key = kApiVersions;
  auto range = codec::request_versions(kApiVersions);
  v.min_version = range.min;
  v.max_version = range.max;
  r.api_keys.push_back(v);
  return codec::encode_response_frame(correlation_id, 0, r, 0);
}

}  // namespace kproxy::policy
