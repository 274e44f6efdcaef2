// Tests for proxy/pipeline/stages/api_versions_stage.h: the policy applied to a connection's ApiVersions
// response with the listener of the connection and the client id of its ApiVersions request.
#include "proxy/pipeline/stages/api_versions_stage.h"

#include <doctest/doctest.h>

#include "codec/api_versions.h"
#include "codec/response_header.h"
#include "proxy/pipeline/frame_context.h"
#include "proxy/pipeline/rule_snapshot.h"

using namespace kproxy;
using nlohmann::json;

namespace {
std::vector<uint8_t> cluster_frame() {
  codec::ApiVersionsResponse r;
  codec::ApiVersionsResponse::ApiVersion end_txn;
  end_txn.api_key = 26;
  end_txn.max_version = 5;
  r.api_keys.push_back(end_txn);
  codec::ApiVersionsResponse::SupportedFeatureKey s;
  s.name = "transaction.version";
  s.max_version = 2;
  r.supported_features.push_back(s);
  codec::ApiVersionsResponse::FinalizedFeatureKey f;
  f.name = "transaction.version";
  f.max_version_level = 2;
  f.min_version_level = 2;
  r.finalized_features.push_back(f);
  r.finalized_features_epoch = 9;
  return codec::encode_response_frame(1, 0, r, 3);
}

// What the client whose ApiVersions request carried `client_id`, on `listener`, gets back.
codec::ApiVersionsResponse seen_by(chaos::LiveRules& control, const char* listener, std::optional<std::string_view> client_id) {
  proxy::RuleSnapshot rules(control);
  proxy::ApiVersionsStage stage(rules);
  proxy::ConnectionInfo conn;
  conn.listener = listener;
  codec::RequestHeader h;
  h.api_key = 18;
  h.api_version = 2;  // below v3: no body to decode
  h.header_version = 1;
  h.client_id = client_id;
  std::vector<uint8_t> request(4, 0);
  proxy::RequestContext req(h, codec::Bytes(request), conn);
  stage.on_request(req);
  auto frame = cluster_frame();
  proxy::ResponseContext resp(18, 3, 0, codec::Bytes(frame), conn);
  stage.on_response(resp);
  auto out = resp.encode();
  codec::ApiVersionsResponse back;
  REQUIRE(codec::decode_api_versions_response(codec::Bytes(out.data() + 8, out.size() - 8), 3, back) == 3);
  return back;
}
}  // namespace

TEST_CASE("the client id of the ApiVersions request and the listener pick the policy entries") {
  chaos::LiveRules control;
  REQUIRE(control.set_api_versions(
              json::parse(R"([{"feature":"transaction.version","max":1,"client_id":"legacy-*","listener":"plain"}])")) == "");
  auto legacy = seen_by(control, "plain", "legacy-7");
  REQUIRE(legacy.finalized_features.size() == 1);
  CHECK(legacy.finalized_features[0].max_version_level == 1);
  CHECK(legacy.finalized_features_epoch == 9);
  CHECK(legacy.api_keys[0].max_version == 4);

  auto other = seen_by(control, "plain", "orders");
  CHECK(other.finalized_features[0].max_version_level == 2);
  CHECK(other.api_keys[0].max_version == 5);
  auto elsewhere = seen_by(control, "tls", "legacy-7");
  CHECK(elsewhere.finalized_features[0].max_version_level == 2);
  auto anonymous = seen_by(control, "plain", std::nullopt);  // a null client id is ""
  CHECK(anonymous.finalized_features[0].max_version_level == 2);
}
