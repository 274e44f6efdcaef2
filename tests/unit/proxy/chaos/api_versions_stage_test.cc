// Tests for proxy/chaos/api_versions_stage.h: the policy applied to a connection's ApiVersions
// response with the listener of the connection and the client id of its ApiVersions request.
#include "proxy/chaos/api_versions_stage.h"

#include <doctest/doctest.h>

#include "codec/api_versions.h"
#include "codec/generated/messages/api_versions.h"
#include "codec/response_header.h"
#include "proxy/chaos/rule_snapshot.h"
#include "proxy/policy/api_versions_policy.h"
#include "proxy/stage/frame_context.h"
#include "tests/unit/support/frames.h"

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
  chaos::RuleSnapshot rules(control);
  chaos::ApiVersionsStage stage(rules);
  stage::ConnectionInfo conn;
  conn.listener = listener;
  codec::RequestHeader h;
  h.api_key = 18;
  h.api_version = 2;  // below v3: no body to decode
  h.header_version = 1;
  h.client_id = client_id;
  std::vector<uint8_t> request(4, 0);
  stage::RequestContext req(h, codec::Bytes(request), conn);
  stage.on_request(req);
  auto frame = cluster_frame();
  stage::ResponseContext resp(18, 3, 0, codec::Bytes(frame), conn);
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

TEST_CASE("a v3+ ApiVersions request names the client's software on the connection; a v2 one names none") {
  chaos::LiveRules control;
  chaos::RuleSnapshot rules(control);
  chaos::ApiVersionsStage stage(rules);
  stage::ConnectionInfo conn;
  conn.listener = "plain";
  codec::ApiVersionsRequest av;
  av.client_software_name = "kgo";
  av.client_software_version = "1.17.1";
  codec::RequestHeader old_header;
  auto old_frame = testing::encoded_request_frame(av, 2, 1, "app", old_header);
  stage::RequestContext old_request(old_header, codec::Bytes(old_frame), conn);
  stage.on_request(old_request);
  CHECK_FALSE(conn.client_software);  // v2 has no software fields
  CHECK_FALSE(old_request.answered());

  codec::RequestHeader header;
  auto frame = testing::encoded_request_frame(av, 3, 2, "app", header);
  stage::RequestContext request(header, codec::Bytes(frame), conn);
  stage.on_request(request);
  REQUIRE(conn.client_software);
  CHECK(conn.client_software_name() == "kgo");
  CHECK(conn.client_software_version() == "1.17.1");
  CHECK_FALSE(request.answered());  // passed on to the broker

  // A later announcement replaces the earlier one.
  av.client_software_name = "kadm";
  codec::RequestHeader again_header;
  auto again = testing::encoded_request_frame(av, 4, 3, "app", again_header);
  stage::RequestContext again_request(again_header, codec::Bytes(again), conn);
  stage.on_request(again_request);
  CHECK(conn.client_software_name() == "kadm");
}

TEST_CASE("an ApiVersions request newer than kproxy decodes is answered by kproxy with v0 UNSUPPORTED_VERSION") {
  chaos::LiveRules control;
  chaos::RuleSnapshot rules(control);
  chaos::ApiVersionsStage stage(rules);
  stage::ConnectionInfo conn;
  codec::RequestHeader h;
  h.api_key = 18;
  h.api_version = static_cast<int16_t>(codec::request_versions(18).max + 1);
  h.correlation_id = 77;
  h.header_version = -1;  // what the header parser says of a version it does not know
  std::vector<uint8_t> request(12, 0);
  stage::RequestContext req(h, codec::Bytes(request), conn);
  stage.on_request(req);
  REQUIRE(req.answered());
  CHECK(req.answer_frame() == policy::unsupported_api_versions_frame(77));
  codec::ApiVersionsResponse answer;
  auto& frame = req.answer_frame();
  REQUIRE(codec::decode_api_versions_response(codec::Bytes(frame.data() + 8, frame.size() - 8), 0, answer) == 0);
  CHECK(answer.error_code == 35);  // UNSUPPORTED_VERSION
  CHECK_FALSE(conn.client_software);

  // Another API's request is none of this stage's business, even at an unknown version.
  codec::RequestHeader other = h;
  other.api_key = 3;
  stage::RequestContext metadata(other, codec::Bytes(request), conn);
  stage.on_request(metadata);
  CHECK_FALSE(metadata.answered());
}

TEST_CASE("kproxy's own answers and responses that do not decode go out as they are") {
  chaos::LiveRules control;
  REQUIRE(control.set_api_versions(json::parse(R"([{"api":"EndTxn","max":3}])")) == "");
  chaos::RuleSnapshot rules(control);
  chaos::ApiVersionsStage stage(rules);
  stage::ConnectionInfo conn;
  conn.listener = "plain";
  auto frame = cluster_frame();
  {
    // Synthetic (a fault rule's answer): not the broker's ranges, not rewritten.
    stage::ExchangeActions actions;
    stage::ResponseContext resp(18, 3, 0, codec::Bytes(frame), conn, actions, /*synthetic=*/true, std::chrono::nanoseconds(0));
    stage.on_response(resp);
    CHECK_FALSE(resp.dirty());
    CHECK(resp.encode() == frame);
  }
  {
    // The same response from the broker is clamped (the policy applies).
    stage::ResponseContext resp(18, 3, 0, codec::Bytes(frame), conn);
    stage.on_response(resp);
    CHECK(resp.dirty());
    CHECK(resp.changed_by() == stage::ResponseContext::bit(stage::StageId::kApiVersions));
  }
  {
    // Cut short: it does not decode, and is forwarded untouched.
    std::vector<uint8_t> cut(frame.begin(), frame.begin() + 12);
    stage::ResponseContext resp(18, 3, 0, codec::Bytes(cut), conn);
    stage.on_response(resp);
    CHECK_FALSE(resp.dirty());
    CHECK(resp.encode() == cut);
  }
  {
    // Another API's response is left alone.
    stage::ResponseContext resp(3, 12, 1, codec::Bytes(frame), conn);
    stage.on_response(resp);
    CHECK_FALSE(resp.dirty());
  }
}
