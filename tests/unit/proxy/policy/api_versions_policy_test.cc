#include "proxy/policy/api_versions_policy.h"

#include <doctest/doctest.h>

#include "../../codec/test_vectors.h"
#include "codec/api_versions.h"
#include "codec/generated/api_keys.h"
#include "codec/response_header.h"

using namespace kproxy;
using nlohmann::json;

namespace {
codec::ApiVersionsResponse broker_response() {
  codec::ApiVersionsResponse r;
  auto add = [&](int16_t k, int16_t lo, int16_t hi) {
    codec::ApiVersionsResponse::ApiVersion v;
    v.api_key = k;
    v.min_version = lo;
    v.max_version = hi;
    r.api_keys.push_back(v);
  };
  add(0, 0, 13);     // Produce (Kafka 4.x advertises 0, KAFKA-18659)
  add(18, 0, 4);     // ApiVersions
  add(26, 0, 5);     // EndTxn
  add(65, 0, 0);     // DescribeTransactions
  add(3, 0, 99);     // Metadata: newer than kproxy decodes
  add(12345, 0, 3);  // a vendor key kproxy does not know
  codec::ApiVersionsResponse::SupportedFeatureKey f;
  f.name = "transaction.version";
  f.max_version = 2;
  r.supported_features.push_back(f);
  r.finalized_features_epoch = 7;
  return r;
}
const codec::ApiVersionsResponse::ApiVersion* find(const codec::ApiVersionsResponse& r, int16_t k) {
  for (const auto& v : r.api_keys)
    if (v.api_key == k) return &v;
  return nullptr;
}
policy::ApiVersionsPolicy parsed_policy(const char* text) {
  std::string error;
  auto p = policy::parse_api_versions_policy(json::parse(text), error);
  INFO(error);
  REQUIRE(p);
  return *p;
}
}  // namespace

TEST_CASE("clamp, hide, decode limits, Produce keeps min 0, unknown keys and tagged fields kept") {
  auto r = broker_response();
  CHECK(policy::rewrite_api_versions(
      r, parsed_policy(R"([{"api":"Produce","min":3,"max":9},{"api":"EndTxn","max":4},{"api":"DescribeTransactions","hide":true}])")));
  CHECK(find(r, 0)->min_version == 0);
  CHECK(find(r, 0)->max_version == 9);
  CHECK(find(r, 26)->max_version == 4);
  CHECK(!find(r, 65));
  CHECK(find(r, 3)->max_version == codec::request_versions(3).max);
  REQUIRE(find(r, 12345));
  CHECK(find(r, 12345)->max_version == 3);
  CHECK(r.supported_features.size() == 1);
  CHECK(r.finalized_features_epoch == 7);
}

TEST_CASE("never widens the broker's range") {
  auto r = broker_response();
  policy::rewrite_api_versions(r, parsed_policy(R"([{"api":"EndTxn","min":0,"max":20}])"));
  CHECK(find(r, 26)->max_version == 5);
  auto r2 = broker_response();
  policy::rewrite_api_versions(r2, parsed_policy(R"([{"api":"EndTxn","min":6}])"));
  CHECK(!find(r2, 26));  // empty range: hidden
}

TEST_CASE("the v0 UNSUPPORTED_VERSION reply is left alone") {
  codec::ApiVersionsResponse r;
  r.error_code = 35;
  r.api_keys.push_back({});
  CHECK(!policy::rewrite_api_versions(r, parsed_policy(R"([{"api":"ApiVersions","max":0}])")));
}

TEST_CASE("kproxy's own v0 UNSUPPORTED_VERSION answer decodes as Java's client would") {
  auto frame = policy::unsupported_api_versions_frame(42);
  codec::Bytes body(frame.data() + 8, frame.size() - 8);
  CHECK(frame[7] == 42);
  codec::ApiVersionsResponse r;
  CHECK(codec::decode_api_versions_response(body, 9, r) == 0);
  CHECK(r.error_code == 35);
  REQUIRE(r.api_keys.size() == 1);
  CHECK(r.api_keys[0].api_key == 18);
  CHECK(r.api_keys[0].max_version == codec::request_versions(18).max);
}

TEST_CASE("the seed ApiVersions v3 response re-encodes with its tagged field after a clamp") {
  auto frame = codec::test::load_vector("api_versions_v3_response.hex");
  codec::ApiVersionsResponse r;
  REQUIRE(codec::decode_api_versions_response(codec::Bytes(frame.data() + 8, frame.size() - 8), 3, r) == 3);
  CHECK(policy::rewrite_api_versions(r, parsed_policy(R"([{"api":"ApiVersions","max":3}])")));
  CHECK(r.api_keys[0].max_version == 3);
  CHECK(r.finalized_features_epoch == 5);
}

namespace {
codec::ApiVersionsResponse cluster_response();  // below
}  // namespace

TEST_CASE("policy errors") {
  std::string e;
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"api":"Nope","max":1}])"), e));
  CHECK(e.rfind("[0].api", 0) == 0);
  // Hiding ApiVersions is well formed but cannot be (422 at the admin API); an unknown API is not
  // well formed (400).
  bool unprocessable = false;
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"api":"ApiVersions","hide":true}])"), e, &unprocessable));
  CHECK(unprocessable);
  unprocessable = false;
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"api":"ApiVersions","min":4,"max":1}])"), e, &unprocessable));  // hides
  CHECK(unprocessable);
  unprocessable = false;
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"api":65536,"max":1}])"), e, &unprocessable));  // never wraps onto Produce
  CHECK(e.rfind("[0].api: unknown API", 0) == 0);
  CHECK_FALSE(unprocessable);
  // Valid by the document's schema, so accepted (issue #30): min above max is an empty range (the
  // API is left out); an entry that changes nothing changes nothing.
  auto empty = policy::parse_api_versions_policy(json::parse(R"([{"api":"EndTxn","min":4,"max":1}])"), e);
  REQUIRE(empty);
  auto r = cluster_response();
  policy::rewrite_api_versions(r, *empty);
  CHECK(!find(r, 26));
  CHECK(policy::parse_api_versions_policy(json::parse(R"([{"api":"EndTxn"}])"), e));
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"api":"EndTxn","maxx":1}])"), e));
  CHECK(e == "[0].maxx: unknown key (expected api, min, max, hide, listener, client_id)");
  CHECK(!policy::parse_api_versions_policy(json::parse(R"({"api":"EndTxn"})"), e));
  CHECK(e.rfind(": expected a list", 0) == 0);
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"max":1}])"), e));
  CHECK(e == "[0].api: missing (give api or feature)");
}

namespace {
// A Kafka 4.4 cluster with transaction.version 2, group.version 1, share.version 1 finalized.
codec::ApiVersionsResponse cluster_response() {
  codec::ApiVersionsResponse r;
  auto add = [&](int16_t k, int16_t lo, int16_t hi) {
    codec::ApiVersionsResponse::ApiVersion v;
    v.api_key = k;
    v.min_version = lo;
    v.max_version = hi;
    r.api_keys.push_back(v);
  };
  add(0, 0, 13);  // Produce
  add(18, 0, 4);  // ApiVersions
  add(24, 0, 5);  // AddPartitionsToTxn
  add(25, 0, 4);  // AddOffsetsToTxn
  add(26, 0, 5);  // EndTxn
  add(28, 0, 5);  // TxnOffsetCommit
  add(68, 0, 1);  // ConsumerGroupHeartbeat
  add(69, 0, 1);  // ConsumerGroupDescribe
  add(76, 1, 1);  // ShareGroupHeartbeat
  add(78, 1, 1);  // ShareFetch
  add(1, 4, 17);  // Fetch
  auto supported = [&](const char* name, int16_t lo, int16_t hi) {
    codec::ApiVersionsResponse::SupportedFeatureKey f;
    f.name = name;
    f.min_version = lo;
    f.max_version = hi;
    r.supported_features.push_back(f);
  };
  auto finalized = [&](const char* name, int16_t level) {
    codec::ApiVersionsResponse::FinalizedFeatureKey f;
    f.name = name;
    f.min_version_level = level;
    f.max_version_level = level;
    r.finalized_features.push_back(f);
  };
  supported("metadata.version", 7, 29);
  supported("transaction.version", 0, 2);
  supported("group.version", 0, 1);
  supported("share.version", 0, 2);
  finalized("metadata.version", 29);
  finalized("transaction.version", 2);
  finalized("group.version", 1);
  finalized("share.version", 1);
  r.finalized_features_epoch = 42;
  return r;
}
const codec::ApiVersionsResponse::FinalizedFeatureKey* finalized(const codec::ApiVersionsResponse& r, std::string_view name) {
  for (const auto& f : r.finalized_features)
    if (f.name == name) return &f;
  return nullptr;
}
const codec::ApiVersionsResponse::SupportedFeatureKey* supported(const codec::ApiVersionsResponse& r, std::string_view name) {
  for (const auto& f : r.supported_features)
    if (f.name == name) return &f;
  return nullptr;
}
std::string parse_error(const char* text) {
  std::string e;
  CHECK(!policy::parse_api_versions_policy(json::parse(text), e));
  return e;
}
}  // namespace

TEST_CASE("transaction.version 1: the finalized level and the pre-KIP-890 API maxima, epoch and supported range kept") {
  auto r = cluster_response();
  CHECK(policy::rewrite_api_versions(r, parsed_policy(R"([{"feature":"transaction.version","max":1}])")));
  REQUIRE(finalized(r, "transaction.version"));
  CHECK(finalized(r, "transaction.version")->max_version_level == 1);
  CHECK(finalized(r, "transaction.version")->min_version_level == 1);
  CHECK(supported(r, "transaction.version")->max_version == 2);  // brokers still support 2: an un-upgraded cluster
  CHECK(r.finalized_features_epoch == 42);
  CHECK(find(r, 0)->max_version == 11);
  CHECK(find(r, 0)->min_version == 0);
  CHECK(find(r, 26)->max_version == 4);
  CHECK(find(r, 28)->max_version == 4);
  CHECK(find(r, 24)->max_version == 3);
  CHECK(find(r, 25)->max_version == 4);  // AddOffsetsToTxn: not tied to transaction.version
  CHECK(find(r, 1)->max_version == std::min<int16_t>(17, codec::request_versions(1).max));
  CHECK(finalized(r, "group.version")->max_version_level == 1);
  CHECK(find(r, 68));
}

TEST_CASE("implied_apis false keeps the API ranges; an api entry of the same client replaces the implied clamp") {
  auto r = cluster_response();
  policy::rewrite_api_versions(r, parsed_policy(R"([{"feature":"transaction.version","max":1,"implied_apis":false}])"));
  CHECK(finalized(r, "transaction.version")->max_version_level == 1);
  CHECK(find(r, 0)->max_version == 13);
  CHECK(find(r, 26)->max_version == 5);

  auto r2 = cluster_response();
  policy::rewrite_api_versions(r2, parsed_policy(R"([{"feature":"transaction.version","max":1},{"api":"Produce","max":12}])"));
  CHECK(find(r2, 0)->max_version == 12);
  CHECK(find(r2, 26)->max_version == 4);
}

TEST_CASE("hide, level 0, supported range clamps") {
  auto r = cluster_response();
  policy::rewrite_api_versions(r, parsed_policy(R"([{"feature":"transaction.version","hide":true}])"));
  CHECK(!finalized(r, "transaction.version"));
  CHECK(!supported(r, "transaction.version"));
  CHECK(find(r, 26)->max_version == 4);  // hidden = level 0 for the client: the old path's maxima

  auto r0 = cluster_response();
  policy::rewrite_api_versions(r0, parsed_policy(R"([{"feature":"transaction.version","max":0}])"));
  CHECK(!finalized(r0, "transaction.version"));  // a broker leaves level 0 out
  CHECK(supported(r0, "transaction.version")->max_version == 2);
  CHECK(find(r0, 0)->max_version == 11);

  auto rs = cluster_response();
  policy::rewrite_api_versions(
      rs, parsed_policy(R"([{"feature":"share.version","supported_max":1},{"feature":"transaction.version","supported_min":1}])"));
  CHECK(supported(rs, "share.version")->max_version == 1);
  CHECK(finalized(rs, "share.version")->max_version_level == 1);
  CHECK(supported(rs, "transaction.version")->min_version == 1);
  CHECK(finalized(rs, "transaction.version")->max_version_level == 2);
  CHECK(find(rs, 0)->max_version == 13);

  auto rt = cluster_response();
  policy::rewrite_api_versions(rt, parsed_policy(R"([{"feature":"transaction.version","supported_max":1}])"));
  CHECK(supported(rt, "transaction.version")->max_version == 1);
  CHECK(finalized(rt, "transaction.version")->max_version_level == 1);  // never above what is supported
  CHECK(find(rt, 26)->max_version == 4);

  auto re = cluster_response();
  policy::rewrite_api_versions(re, parsed_policy(R"([{"feature":"group.version","supported_min":3}])"));
  CHECK(!supported(re, "group.version"));  // min > max is refused by Java's SupportedVersionRange: left out
  CHECK(!finalized(re, "group.version"));
  CHECK(!find(re, 68));

  // Entries a schema allows are valid (issue #30): supported_min above supported_max is an empty
  // range, so the feature is left out; max above supported_max is clamped to it.
  auto rm = cluster_response();
  policy::rewrite_api_versions(rm, parsed_policy(R"([{"feature":"transaction.version","supported_min":2,"supported_max":1}])"));
  CHECK(!supported(rm, "transaction.version"));
  CHECK(!finalized(rm, "transaction.version"));
  auto rc = cluster_response();
  policy::rewrite_api_versions(rc, parsed_policy(R"([{"feature":"transaction.version","max":2,"supported_max":1}])"));
  CHECK(supported(rc, "transaction.version")->max_version == 1);
  CHECK(finalized(rc, "transaction.version")->max_version_level == 1);
  // 9.0 is an integer to JSON Schema.
  auto r9 = cluster_response();
  policy::rewrite_api_versions(r9, parsed_policy(R"([{"api":"Produce","max":9.0}])"));
  CHECK(find(r9, 0)->max_version == 9);
}

TEST_CASE("group.version and share.version: hidden or 0 hides the KIP-848 / KIP-932 APIs") {
  auto r = cluster_response();
  policy::rewrite_api_versions(r, parsed_policy(R"([{"feature":"group.version","hide":true},{"feature":"share.version","max":0}])"));
  CHECK(!finalized(r, "group.version"));
  CHECK(!find(r, 68));
  CHECK(!find(r, 69));
  CHECK(!finalized(r, "share.version"));
  CHECK(supported(r, "share.version"));
  CHECK(!find(r, 76));
  CHECK(!find(r, 78));
  CHECK(find(r, 0)->max_version == 13);
  CHECK(finalized(r, "transaction.version")->max_version_level == 2);
  // share.version 2 → 1: no API is tied to level 2 in the table.
  auto r1 = cluster_response();
  r1.finalized_features[3].max_version_level = 2;
  policy::rewrite_api_versions(r1, parsed_policy(R"([{"feature":"share.version","max":1}])"));
  CHECK(finalized(r1, "share.version")->max_version_level == 1);
  CHECK(find(r1, 76));
}

TEST_CASE("a cluster already below a level keeps its own API ranges") {
  auto r = cluster_response();
  r.finalized_features[1].max_version_level = 1;  // transaction.version 1 finalized
  r.finalized_features[1].min_version_level = 1;
  policy::rewrite_api_versions(r, parsed_policy(R"([{"feature":"transaction.version","max":1}])"));
  CHECK(find(r, 0)->max_version == 13);
  CHECK(find(r, 26)->max_version == 5);
  // A response without features (ApiVersions v0-2) is left as it is.
  auto old = cluster_response();
  old.supported_features.clear();
  old.finalized_features.clear();
  policy::rewrite_api_versions(old, parsed_policy(R"([{"feature":"transaction.version","max":1}])"));
  CHECK(find(old, 26)->max_version == 5);
}

TEST_CASE("scopes: client_id and listener globs, the first matching entry per feature applies") {
  auto policy = parsed_policy(R"([
    {"feature":"transaction.version","max":1,"client_id":"legacy-*"},
    {"feature":"transaction.version","max":0,"listener":"old-*","client_id":"batch"},
    {"api":"Fetch","max":12,"listener":"plain"},
    {"feature":"group.version","hide":true}])");
  auto legacy = cluster_response();
  policy::rewrite_api_versions(legacy, policy, {"plain", "legacy-orders"});
  CHECK(finalized(legacy, "transaction.version")->max_version_level == 1);
  CHECK(find(legacy, 26)->max_version == 4);
  CHECK(find(legacy, 1)->max_version == 12);
  CHECK(!finalized(legacy, "group.version"));

  auto other = cluster_response();
  policy::rewrite_api_versions(other, policy, {"tls", "orders"});
  CHECK(finalized(other, "transaction.version")->max_version_level == 2);
  CHECK(find(other, 26)->max_version == 5);
  CHECK(find(other, 0)->max_version == 13);
  CHECK(find(other, 1)->max_version > 12);
  CHECK(!finalized(other, "group.version"));

  auto batch = cluster_response();
  policy::rewrite_api_versions(batch, policy, {"old-east", "batch"});
  CHECK(!finalized(batch, "transaction.version"));
  auto batch_elsewhere = cluster_response();
  policy::rewrite_api_versions(batch_elsewhere, policy, {"plain", "batch"});
  CHECK(finalized(batch_elsewhere, "transaction.version")->max_version_level == 2);
}

TEST_CASE("a rewritten response with features encodes and decodes back (tagged fields 0-2)") {
  auto r = cluster_response();
  REQUIRE(policy::rewrite_api_versions(
      r, parsed_policy(R"([{"feature":"transaction.version","max":1},{"feature":"group.version","hide":true}])")));
  for (int16_t v : {3, 4}) {
    auto frame = codec::encode_response_frame(7, 0, r, v);
    codec::ApiVersionsResponse back;
    REQUIRE(codec::decode_api_versions_response(codec::Bytes(frame.data() + 8, frame.size() - 8), v, back) == v);
    CHECK(back.finalized_features_epoch == 42);
    REQUIRE(finalized(back, "transaction.version"));
    CHECK(finalized(back, "transaction.version")->max_version_level == 1);
    CHECK(!finalized(back, "group.version"));
    CHECK(!supported(back, "group.version"));
    CHECK(supported(back, "share.version")->max_version == 2);
    CHECK(find(back, 0)->max_version == 11);
  }
}

TEST_CASE("feature entry errors") {
  CHECK(parse_error(R"([{"feature":"transaction.version","api":"EndTxn","max":1}])") == "[0]: give api or feature, not both");
  CHECK(parse_error(R"([{"feature":"transaction.version","min":1}])").rfind("[0].min: a feature has no min", 0) == 0);
  CHECK(parse_error(R"([{"feature":"transaction.version","level":1}])") ==
        "[0].level: unknown key (expected feature, max, supported_min, supported_max, hide, implied_apis, listener, client_id)");
  CHECK(parse_error(R"([{"feature":"","max":1}])").rfind("[0].feature: expected a feature name", 0) == 0);
  CHECK(parse_error(R"([{"feature":7,"max":1}])").rfind("[0].feature: expected a feature name", 0) == 0);
  CHECK(parsed_policy(R"([{"feature":"transaction.version"}])").features.size() == 1);  // changes nothing
  CHECK(parse_error(R"([{"feature":"transaction.version","max":-1}])") == "[0].max: expected an integer from 0 to 32767, got -1");
  CHECK(parse_error(R"([{"feature":"transaction.version","max":"1"}])") == "[0].max: expected an integer from 0 to 32767, got \"1\"");
  CHECK(parse_error(R"([{"feature":"transaction.version","max":1.5}])") == "[0].max: expected an integer from 0 to 32767, got 1.5");
  {
    auto hidden = parsed_policy(R"([{"feature":"transaction.version","hide":true,"max":1}])");  // hide wins
    auto r = cluster_response();
    policy::rewrite_api_versions(r, hidden);
    CHECK(!finalized(r, "transaction.version"));
    CHECK(!supported(r, "transaction.version"));
  }
  CHECK(parse_error(R"([{"feature":"transaction.version","max":1,"implied_apis":"no"}])") == "[0].implied_apis: expected true or false");
  CHECK(parse_error(R"([{"feature":"transaction.version","max":1,"client_id":5}])").rfind("[0].client_id: expected a glob", 0) == 0);
  CHECK(parse_error(R"([{"feature":"transaction.version","max":1,"listener":"pl[ain"}])").rfind("[0].listener: ", 0) == 0);
  // An entry an earlier one shadows never applies: accepted (a valid list), and said for a warning.
  CHECK(parsed_policy(R"([{"feature":"transaction.version","max":1},{"api":"Produce","max":9},{"feature":"transaction.version","max":0}])")
            .shadowed ==
        std::vector<std::string>{"[2]: feature transaction.version for every client is already given by [0] and never applies"});
  CHECK(parsed_policy(R"([{"api":"Produce","max":9,"client_id":"a*"},{"api":0,"max":8,"client_id":"a*"}])").shadowed ==
        std::vector<std::string>{"[1]: api Produce for client_id 'a*' is already given by [0] and never applies"});
  // Different scopes for one feature are what scoping is for.
  auto p = parsed_policy(R"([{"feature":"transaction.version","max":1,"client_id":"a*"},{"feature":"transaction.version","max":2}])");
  CHECK(p.features.size() == 2);
  CHECK(p.spec.size() == 2);
}
