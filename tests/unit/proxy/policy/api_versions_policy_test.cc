#include "proxy/policy/api_versions_policy.h"

#include <doctest/doctest.h>

#include "codec/generated/api_keys.h"
#include "codec/api_versions.h"
#include "../../codec/test_vectors.h"

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
  add(0, 0, 13);      // Produce (Kafka 4.x advertises 0, KAFKA-18659)
  add(18, 0, 4);      // ApiVersions
  add(26, 0, 5);      // EndTxn
  add(65, 0, 0);      // DescribeTransactions
  add(3, 0, 99);      // Metadata: newer than kproxy decodes
  add(12345, 0, 3);   // a vendor key kproxy does not know
  codec::ApiVersionsResponse::SupportedFeatureKey f;
  f.name = "transaction.version";
  f.max_version = 2;
  r.supported_features.push_back(f);
  r.finalized_features_epoch = 7;
  return r;
}
const codec::ApiVersionsResponse::ApiVersion* find(const codec::ApiVersionsResponse& r, int16_t k) {
  for (const auto& v : r.api_keys) if (v.api_key == k) return &v;
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
  CHECK(policy::rewrite_api_versions(r, parsed_policy(R"([{"api":"Produce","min":3,"max":9},{"api":"EndTxn","max":4},{"api":"DescribeTransactions","hide":true}])")));
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

TEST_CASE("policy errors") {
  std::string e;
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"api":"Nope","max":1}])"), e));
  CHECK(e.rfind("[0].api", 0) == 0);
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"api":"EndTxn","min":4,"max":1}])"), e));
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"api":"ApiVersions","hide":true}])"), e));
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"api":"EndTxn"}])"), e));
  CHECK(!policy::parse_api_versions_policy(json::parse(R"([{"api":"EndTxn","maxx":1}])"), e));
}
