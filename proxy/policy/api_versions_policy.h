// ApiVersions policy: what kproxy advertises to clients in ApiVersions responses
// (docs/protocol.md "ApiVersions", docs/faults.md scenario 13).
//
// The config's `api_versions:` list (or PUT /api-versions) clamps or hides APIs:
//   [{"api": "Produce", "max": 9}, {"api": "EndTxn", "min": 0, "max": 4}, {"api": "DescribeTransactions", "hide": true}]
// Applied to every decoded broker response:
//   - a range is only ever narrowed, never widened beyond the broker's;
//   - every API the codec knows is capped at the versions kproxy can decode (the broker may be
//     newer than kproxy); API keys unknown to kproxy pass through (forwarded untouched);
//   - Produce keeps the broker's minimum (0 on Kafka 4.x) even when clamped: librdkafka turns
//     compression off when it sees a minimum above 0 (KAFKA-18659);
//   - a range that becomes empty is hidden; hidden APIs disappear from the list (the client then
//     reports UnsupportedVersionException when it needs them);
//   - the v0-format UNSUPPORTED_VERSION reply (decoded through codec/api_versions.h's fallback) is
//     left untouched: the client retries at a lower version;
//   - every other field, tagged fields included (SupportedFeatures, FinalizedFeatures...), is kept.
// A request newer than kproxy can decode gets kproxy's own v0 UNSUPPORTED_VERSION answer listing
// the ApiVersions versions it decodes (docs/protocol.md "Requests newer than kproxy"), as the broker does.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/generated/messages/api_versions.h"

namespace kproxy::policy {

struct ApiVersionsPolicy {
  struct Entry {
    std::optional<int16_t> min, max;
    bool hide = false;
  };
  std::map<int16_t, Entry> apis;
  nlohmann::json spec = nlohmann::json::array();  ///< as given (GET /api-versions)
};

/// Parses the list; nullopt with `error` = "[i].key: why" when invalid.
std::optional<ApiVersionsPolicy> parse_api_versions_policy(const nlohmann::json& list, std::string& error);

/// Applies `policy` (and kproxy's own decode limits) to a decoded response. True when changed.
bool rewrite_api_versions(codec::ApiVersionsResponse& response, const ApiVersionsPolicy& policy);

/// kproxy's v0 UNSUPPORTED_VERSION reply to an ApiVersions request it cannot decode: a whole
/// frame (response header v0), ApiKeys = [ApiVersions min-max kproxy decodes].
std::vector<uint8_t> unsupported_api_versions_frame(int32_t correlation_id);

}  // namespace kproxy::policy
