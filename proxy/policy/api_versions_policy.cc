#include "proxy/policy/api_versions_policy.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "codec/generated/api_keys.h"
#include "codec/generated/error_code.h"
#include "codec/response_header.h"
#include "proxy/util/glob.h"

namespace kproxy::policy {

namespace {
constexpr auto kProduce = static_cast<int16_t>(codec::ApiKey::kProduce);
constexpr auto kApiVersions = static_cast<int16_t>(codec::ApiKey::kApiVersions);
constexpr auto kUnsupportedVersion = static_cast<int16_t>(codec::ErrorCode::kUnsupportedVersion);
constexpr int16_t kHidden = -1;

constexpr int16_t key(codec::ApiKey k) { return static_cast<int16_t>(k); }

// What an entry may say, for the "unknown key" message.
constexpr const char* kApiKeys = "api, min, max, hide, listener, client_id";
constexpr const char* kFeatureKeys = "feature, max, supported_min, supported_max, hide, implied_apis, listener, client_id";

bool known(const nlohmann::json& e, std::initializer_list<const char*> keys, const std::string& at, const char* expected,
           std::string& error) {
  for (auto it = e.begin(); it != e.end(); ++it) {
    bool ok = false;
    for (const char* k : keys) ok = ok || it.key() == k;
    if (!ok) {
      error = at + "." + it.key() + ": unknown key (expected " + expected + ")";
      return false;
    }
  }
  return true;
}

// A version or level: an integer 0..32767 (both are int16 on the wire).
bool read_version(const nlohmann::json& e, const char* k, const std::string& at, std::optional<int16_t>& out, std::string& error) {
  if (!e.contains(k)) return true;
  // JSON Schema's integer is a number without a fractional part: 9 and 9.0 alike.
  const auto& v = e[k];
  double d = v.is_number() ? v.get<double>() : -1;
  if (!v.is_number() || d != std::floor(d) || d < 0 || d > 0x7fff) {
    error = at + "." + k + ": expected an integer from 0 to 32767, got " + v.dump();
    return false;
  }
  out = static_cast<int16_t>(d);
  return true;
}

bool read_bool(const nlohmann::json& e, const char* k, const std::string& at, bool& out, std::string& error) {
  if (!e.contains(k)) return true;
  if (!e[k].is_boolean()) {
    error = at + "." + k + ": expected true or false";
    return false;
  }
  out = e[k].get<bool>();
  return true;
}

bool read_scope(const nlohmann::json& e, const std::string& at, PolicyScope& scope, std::string& error) {
  for (const char* k : {"listener", "client_id"}) {
    if (!e.contains(k)) continue;
    if (!e[k].is_string()) {
      error = at + "." + k + ": expected a glob (a string, e.g. \"legacy-*\")";
      return false;
    }
    auto glob = e[k].get<std::string>();
    if (auto why = util::glob_error(glob); !why.empty()) {
      error = at + "." + k + ": " + why;
      return false;
    }
    (std::string(k) == "listener" ? scope.listener : scope.client_id) = glob;
  }
  return true;
}

std::string scope_text(const PolicyScope& s) {
  if (!s.listener && !s.client_id) return "every client";
  std::string out;
  if (s.listener) out += "listener '" + *s.listener + "'";
  if (s.client_id) out += std::string(out.empty() ? "" : ", ") + "client_id '" + *s.client_id + "'";
  return out;
}

bool parse_api_entry(const nlohmann::json& e, const std::string& at, ApiVersionsPolicy::Entry& entry, std::string& error,
                     bool& unprocessable) {
  if (!known(e, {"api", "min", "max", "hide", "listener", "client_id"}, at, kApiKeys, error)) return false;
  std::optional<int16_t> k;
  if (e["api"].is_string()) {
    k = codec::api_key_for_name(e["api"].get<std::string>());
  } else if (e["api"].is_number()) {
    double d = e["api"].get<double>();  // 0 and 0.0 alike; nothing past int16 wraps onto a real key
    if (d == std::floor(d) && d >= 0 && d <= 0x7fff && codec::api_name(static_cast<int16_t>(d))) k = static_cast<int16_t>(d);
  }
  if (!k) {
    error = at + ".api: unknown API " + e["api"].dump();
    return false;
  }
  entry.api = *k;
  if (!read_version(e, "min", at, entry.min, error) || !read_version(e, "max", at, entry.max, error)) return false;
  // min above max is an empty range: the API is left out, as with hide. (An entry that changes
  // nothing, e.g. hide: false alone, is accepted and changes nothing.)
  if (!read_bool(e, "hide", at, entry.hide, error) || !read_scope(e, at, entry.scope, error)) return false;
  if (*k == kApiVersions && (entry.hide || (entry.min && entry.max && *entry.min > *entry.max))) {
    error = at + ".hide: ApiVersions cannot be hidden (clients need it to negotiate)";
    unprocessable = true;  // well formed; what it asks of this one API cannot be
    return false;
  }
  return true;
}

bool parse_feature_entry(const nlohmann::json& e, const std::string& at, ApiVersionsPolicy::FeatureEntry& entry, std::string& error) {
  if (e.contains("min")) {
    // The finalized level has no lower bound to raise; the supported range has.
    error = at + ".min: a feature has no min (use max for the finalized level, supported_min/supported_max for the supported range)";
    return false;
  }
  if (!known(e, {"feature", "max", "supported_min", "supported_max", "hide", "implied_apis", "listener", "client_id"}, at, kFeatureKeys,
             error))
    return false;
  if (!e["feature"].is_string() || e["feature"].get<std::string>().empty()) {
    error = at + ".feature: expected a feature name (e.g. \"transaction.version\")";
    return false;
  }
  entry.name = e["feature"].get<std::string>();
  if (!read_version(e, "max", at, entry.max, error) || !read_version(e, "supported_min", at, entry.supported_min, error) ||
      !read_version(e, "supported_max", at, entry.supported_max, error))
    return false;
  // supported_min above supported_max is an empty range: the feature is left out, as when the
  // broker's range and the entry's do not meet. max above supported_max: the finalized level is
  // clamped to supported_max all the same. (Both once refused; a schema-valid entry is valid.)
  if (!read_bool(e, "hide", at, entry.hide, error) || !read_bool(e, "implied_apis", at, entry.implied_apis, error) ||
      !read_scope(e, at, entry.scope, error))
    return false;
  // hide: true wins over max / supported_min / supported_max (the feature is left out whatever
  // they say); an entry that changes nothing is accepted and changes nothing.
  return true;
}

// Per API / feature the first entry whose scope matches `who`.
template <class E, class K>
std::map<K, const E*> first_matching(const std::vector<E>& entries, const ClientIdentity& who, K E::*field) {
  std::map<K, const E*> out;
  for (const auto& e : entries)
    if (e.scope.matches(who.listener, who.client_id)) out.emplace(e.*field, &e);
  return out;
}

}  // namespace

bool PolicyScope::matches(std::string_view listener_name, std::string_view client_id_value) const {
  if (listener && !util::glob_match(*listener, listener_name)) return false;
  if (client_id && !util::glob_match(*client_id, client_id_value)) return false;
  return true;
}

const std::vector<ImpliedApiLimit>& implied_api_limits() {
  // Derived from Kafka 4.4 (docs/api-versions-policy.md "Implied API versions" has the sources):
  //  - transaction.version < 2 (KIP-890 part 2 off): the Java producer builds Produce with
  //    ProduceRequest.LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2 = 11, EndTxn at most v4
  //    (EndTxnRequest.Builder), TxnOffsetCommit at most v4 (TxnOffsetCommitRequest.Builder) and
  //    AddPartitionsToTxn at most v3 (AddPartitionsToTxnRequest.Builder.forClient); the broker
  //    reads EndTxn v5+ and AddPartitionsToTxn v4+ as TV_2 (TransactionVersion.transactionVersionForEndTxn/...ForAddPartitionsToTxn).
  //  - group.version < 1 (KIP-848 off): KafkaApis answers ConsumerGroupHeartbeat/Describe with
  //    UNSUPPORTED_VERSION (GroupVersion.isConsumerRebalanceProtocolSupported).
  //  - share.version < 1 (KIP-932 off): the share-group APIs likewise (ShareVersion.supportsShareGroups).
  //  - streams.version < 1 (KIP-1071 off): the streams-group APIs likewise (StreamsVersion.streamsGroupSupported).
  static const std::vector<ImpliedApiLimit> table = {
      {"transaction.version", 2, key(codec::ApiKey::kProduce), 11},
      {"transaction.version", 2, key(codec::ApiKey::kEndTxn), 4},
      {"transaction.version", 2, key(codec::ApiKey::kTxnOffsetCommit), 4},
      {"transaction.version", 2, key(codec::ApiKey::kAddPartitionsToTxn), 3},
      {"group.version", 1, key(codec::ApiKey::kConsumerGroupHeartbeat), kHidden},
      {"group.version", 1, key(codec::ApiKey::kConsumerGroupDescribe), kHidden},
      {"share.version", 1, key(codec::ApiKey::kShareGroupHeartbeat), kHidden},
      {"share.version", 1, key(codec::ApiKey::kShareGroupDescribe), kHidden},
      {"share.version", 1, key(codec::ApiKey::kShareFetch), kHidden},
      {"share.version", 1, key(codec::ApiKey::kShareAcknowledge), kHidden},
      {"share.version", 1, key(codec::ApiKey::kDescribeShareGroupOffsets), kHidden},
      {"share.version", 1, key(codec::ApiKey::kAlterShareGroupOffsets), kHidden},
      {"share.version", 1, key(codec::ApiKey::kDeleteShareGroupOffsets), kHidden},
      {"streams.version", 1, key(codec::ApiKey::kStreamsGroupHeartbeat), kHidden},
      {"streams.version", 1, key(codec::ApiKey::kStreamsGroupDescribe), kHidden},
      {"streams.version", 1, key(codec::ApiKey::kStreamsGroupTopologyDescriptionUpdate), kHidden},
  };
  return table;
}

std::optional<ApiVersionsPolicy> parse_api_versions_policy(const nlohmann::json& list, std::string& error, bool* unprocessable) {
  ApiVersionsPolicy policy;
  bool cannot_apply = false;
  if (list.is_null()) return policy;
  if (!list.is_array()) {
    error = ": expected a list of {api, min, max, hide} or {feature, max, supported_min, supported_max, hide}";
    return std::nullopt;
  }
  policy.spec = list;
  // (target, scope) → first index, to refuse an entry that an earlier one shadows.
  std::vector<std::pair<std::string, std::pair<PolicyScope, size_t>>> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& e = list[i];
    std::string at = "[" + std::to_string(i) + "]";
    if (!e.is_object()) {
      error = at + ": expected {api, min, max, hide} or {feature, max, supported_min, supported_max, hide}";
      return std::nullopt;
    }
    if (e.contains("api") && e.contains("feature")) {
      error = at + ": give api or feature, not both";
      return std::nullopt;
    }
    std::string target;
    PolicyScope scope;
    if (e.contains("feature")) {
      ApiVersionsPolicy::FeatureEntry entry;
      if (!parse_feature_entry(e, at, entry, error)) return std::nullopt;
      target = "feature " + entry.name;
      scope = entry.scope;
      policy.features.push_back(std::move(entry));
    } else if (e.contains("api")) {
      ApiVersionsPolicy::Entry entry;
      if (!parse_api_entry(e, at, entry, error, cannot_apply)) {
        if (unprocessable) *unprocessable = cannot_apply;
        return std::nullopt;
      }
      target = std::string("api ") + codec::api_name(entry.api);
      scope = entry.scope;
      policy.apis.push_back(entry);
    } else {
      error = at + ".api: missing (give api or feature)";
      return std::nullopt;
    }
    // An entry with the target and scope of an earlier one never applies (the first matching
    // entry does): accepted, as the list is valid, and logged by whoever installs it.
    for (const auto& [t, s] : seen) {
      if (t == target && s.first == scope)
        policy.shadowed.push_back(at + ": " + target + " for " + scope_text(scope) + " is already given by [" + std::to_string(s.second) +
                                  "] and never applies");
    }
    seen.push_back({target, {scope, i}});
  }
  return policy;
}

bool rewrite_api_versions(codec::ApiVersionsResponse& response, const ApiVersionsPolicy& policy, const ClientIdentity& who) {
  if (response.error_code == kUnsupportedVersion) return false;  // v0 fallback body: the client retries lower
  bool changed = false;
  auto apis = first_matching(policy.apis, who, &ApiVersionsPolicy::Entry::api);
  auto features = first_matching(policy.features, who, &ApiVersionsPolicy::FeatureEntry::name);

  // Features first: the levels the client will see decide the implied API limits.
  // feature → (the broker's finalized level, the level the client sees); absent or hidden: 0.
  std::map<std::string, std::pair<int16_t, int16_t>, std::less<>> levels;
  if (!features.empty()) {
    for (const auto& [name, rule] : features) {
      if (!rule->implied_apis) continue;
      int16_t level = 0;
      for (const auto& f : response.finalized_features)
        if (f.name == name) level = f.max_version_level;
      levels[name] = {level, 0};
    }
    std::set<std::string, std::less<>> hidden;
    std::vector<codec::ApiVersionsResponse::SupportedFeatureKey> supported;
    for (auto f : response.supported_features) {
      auto it = features.find(std::string(f.name));
      if (it == features.end()) {
        supported.push_back(f);
        continue;
      }
      const auto& rule = *it->second;
      if (rule.hide) {
        hidden.insert(rule.name);
        changed = true;
        continue;
      }
      int16_t lo = f.min_version, hi = f.max_version;
      if (rule.supported_max) hi = std::min(hi, *rule.supported_max);
      if (rule.supported_min) lo = std::max(lo, *rule.supported_min);
      if (lo > hi) {
        // Java's SupportedVersionRange refuses min > max (BaseVersionRange): leave it out instead.
        hidden.insert(rule.name);
        changed = true;
        continue;
      }
      if (lo != f.min_version || hi != f.max_version) changed = true;
      f.min_version = lo;
      f.max_version = hi;
      supported.push_back(f);
    }
    response.supported_features = std::move(supported);
    std::vector<codec::ApiVersionsResponse::FinalizedFeatureKey> finalized;
    for (auto f : response.finalized_features) {
      auto it = features.find(std::string(f.name));
      if (it == features.end()) {
        finalized.push_back(f);
        continue;
      }
      const auto& rule = *it->second;
      if (rule.hide || hidden.count(rule.name)) {
        changed = true;
        continue;
      }
      int16_t level = f.max_version_level;
      if (rule.max) level = std::min(level, *rule.max);
      if (rule.supported_max) level = std::min(level, *rule.supported_max);
      if (level <= 0) {
        // Level 0 is "off": brokers leave such a feature out of FinalizedFeatures.
        changed = true;
        continue;
      }
      if (level != f.max_version_level || f.min_version_level > level) changed = true;
      f.max_version_level = level;
      f.min_version_level = std::min(f.min_version_level, level);
      finalized.push_back(f);
    }
    response.finalized_features = std::move(finalized);
    for (auto& [name, seen] : levels)
      for (const auto& f : response.finalized_features)
        if (f.name == name) seen.second = f.max_version_level;
  }
  // An API range is clamped when the policy moved a feature's level from at or above the level
  // the range needs to below it; a cluster really at that level keeps the broker's own ranges.
  std::map<int16_t, int16_t> implied;  // api → max (kHidden: hidden)
  for (const auto& row : implied_api_limits()) {
    auto it = levels.find(row.feature);
    if (it == levels.end() || it->second.first < row.below_level || it->second.second >= row.below_level) continue;
    auto [at, fresh] = implied.emplace(row.api, row.max_version);
    if (!fresh) at->second = std::min(at->second, row.max_version);
  }

  std::vector<codec::ApiVersionsResponse::ApiVersion> kept;
  kept.reserve(response.api_keys.size());
  bool apis_changed = false;
  for (auto entry : response.api_keys) {
    int16_t min = entry.min_version, max = entry.max_version;
    auto is_known = codec::api_name(entry.api_key) != nullptr;
    if (is_known) {
      // Never advertise what kproxy cannot decode (docs/protocol.md "What kproxy advertises").
      auto codec_range = codec::request_versions(entry.api_key);
      max = std::min(max, codec_range.max);
      if (entry.api_key != kProduce) min = std::max(min, codec_range.min);
    }
    bool hide = false;
    if (auto it = apis.find(entry.api_key); it != apis.end()) {
      // The user's own entry for this API replaces what a feature implies.
      hide = it->second->hide;
      if (it->second->max) max = std::min(max, *it->second->max);
      // Produce keeps the broker's minimum (KAFKA-18659); others are only ever raised.
      if (it->second->min && entry.api_key != kProduce) min = std::max(min, *it->second->min);
    } else if (auto imp = implied.find(entry.api_key); imp != implied.end()) {
      if (imp->second == kHidden) hide = true;
      else max = std::min(max, imp->second);
    }
    if (hide || min > max) {
      apis_changed = true;
      continue;
    }
    if (min != entry.min_version || max != entry.max_version) {
      entry.min_version = min;
      entry.max_version = max;
      apis_changed = true;
    }
    kept.push_back(entry);
  }
  if (apis_changed) response.api_keys = std::move(kept);
  return changed || apis_changed;
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
