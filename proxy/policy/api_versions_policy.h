// ApiVersions policy: what kproxy advertises to clients in ApiVersions responses
// (docs/protocol.md "ApiVersions", docs/api-versions-policy.md, docs/faults.md scenario 13).
//
// The config's `api_versions:` list (or PUT /api-versions) clamps or hides APIs and features:
//   [{"api": "Produce", "max": 9}, {"api": "EndTxn", "min": 0, "max": 4}, {"api": "DescribeTransactions", "hide": true},
//    {"feature": "transaction.version", "max": 1, "client_id": "legacy-*"},
//    {"feature": "group.version", "hide": true, "listener": "plain"}]
// Applied to every decoded broker response:
//   - a range is only ever narrowed, never widened beyond the broker's;
//   - every API the codec knows is capped at the versions kproxy can decode (the broker may be
//     newer than kproxy); API keys unknown to kproxy pass through (forwarded untouched);
//   - Produce keeps the broker's minimum (0 on Kafka 4.x) even when clamped: librdkafka turns
//     compression off when it sees a minimum above 0 (KAFKA-18659);
//   - a range that becomes empty is hidden; hidden APIs disappear from the list (the client then
//     reports UnsupportedVersionException when it needs them);
//   - features (SupportedFeatures / FinalizedFeatures, v3+ tagged fields, KIP-584): `max` clamps
//     the finalized level, `supported_min`/`supported_max` the supported range (the finalized level
//     follows a lower supported max), `hide` removes the feature from both lists; a finalized level
//     clamped to 0 is left out of FinalizedFeatures, as a broker does for a level-0 feature;
//   - a feature whose level the client sees is below the one an API version range needs clamps
//     that range too (the table `implied_api_limits`, derived from Kafka 4.4's code, documented in
//     docs/api-versions-policy.md), unless the entry says `"implied_apis": false` or an `api` entry
//     of the same scope names that API;
//   - FinalizedFeaturesEpoch is never changed (docs/api-versions-policy.md "FinalizedFeaturesEpoch");
//   - entries may be scoped with `listener` and `client_id` globs (the client id of the ApiVersions
//     request); per API and per feature the first entry, in list order, whose scope matches applies;
//   - the v0-format UNSUPPORTED_VERSION reply (decoded through codec/api_versions.h's fallback) is
//     left untouched: the client retries at a lower version;
//   - every other field (ZkMigrationReady, unknown tagged fields) is kept.
// A request newer than kproxy can decode gets kproxy's own v0 UNSUPPORTED_VERSION answer listing
// the ApiVersions versions it decodes (docs/protocol.md "Requests newer than kproxy"), as the broker does.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/generated/messages/api_versions.h"

namespace kproxy::policy {

/// Which connections an entry applies to: both globs (proxy/util/glob.h) must
/// match; an absent one matches everything.
struct PolicyScope {
  std::optional<std::string> listener, client_id;
  bool matches(std::string_view listener_name, std::string_view client_id_value) const;
  bool operator==(const PolicyScope&) const = default;
};

/// The connection an ApiVersions response is for.
struct ClientIdentity {
  std::string_view listener;
  std::string_view client_id;  ///< from the ApiVersions request header ("" when null or absent)
};

struct ApiVersionsPolicy {
  struct Entry {
    int16_t api = 0;
    std::optional<int16_t> min, max;
    bool hide = false;
    PolicyScope scope;
  };
  struct FeatureEntry {
    std::string name;
    std::optional<int16_t> max;  ///< finalized max level
    std::optional<int16_t> supported_min, supported_max;
    bool hide = false;
    bool implied_apis = true;  ///< clamp the API ranges the level implies (implied_api_limits)
    PolicyScope scope;
  };
  std::vector<Entry> apis;                        ///< in list order
  std::vector<FeatureEntry> features;             ///< in list order
  nlohmann::json spec = nlohmann::json::array();  ///< as given (GET /api-versions)
  /// Entries that can never apply (an earlier entry has their API or feature and scope), one
  /// line each, for a warning.
  std::vector<std::string> shadowed;
};

/// One row of the feature → API table: while the level a client sees for `feature` is below
/// `below_level`, API `api` is capped at `max_version` (-1: hidden).
struct ImpliedApiLimit {
  const char* feature;
  int16_t below_level;
  int16_t api;
  int16_t max_version;
};

/// The table (docs/api-versions-policy.md "Implied API versions", with the Kafka sources it comes from).
const std::vector<ImpliedApiLimit>& implied_api_limits();

/// Parses the list; nullopt with `error` = "[i].key: why" when invalid. `unprocessable`, when
/// given, is set when the list is well formed but asks what cannot be (ApiVersions hidden, or
/// given an empty range): the admin API answers that 422, anything else 400.
std::optional<ApiVersionsPolicy> parse_api_versions_policy(const nlohmann::json& list, std::string& error, bool* unprocessable = nullptr);

/// Applies `policy` (the entries whose scope matches `who`) and kproxy's own decode limits to a
/// decoded response. True when changed.
bool rewrite_api_versions(codec::ApiVersionsResponse& response, const ApiVersionsPolicy& policy, const ClientIdentity& who = {});

/// kproxy's v0 UNSUPPORTED_VERSION reply to an ApiVersions request it cannot decode: a whole
/// frame (response header v0), ApiKeys = [ApiVersions min-max kproxy decodes].
std::vector<uint8_t> unsupported_api_versions_frame(int32_t correlation_id);

}  // namespace kproxy::policy
