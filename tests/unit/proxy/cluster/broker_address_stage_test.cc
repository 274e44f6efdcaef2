// BrokerAddressStage: responses that name brokers leave with kproxy's addresses, newly numbered
// brokers are reported to the connection's port opener, and what could not be rewritten closes
// the connection (counted in the proxy's metrics).
#include "proxy/cluster/broker_address_stage.h"

#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/response_header.h"
#include "proxy/stage/frame_context.h"
#include "tests/unit/support/frames.h"
#include "tests/unit/support/pipeline.h"

using namespace kproxy;

namespace {

struct RecordingOpener final : stage::BrokerPortOpener {
  std::vector<std::pair<int32_t, uint16_t>> opened;
  void open_broker_port(int32_t node_id, uint16_t port) override { opened.emplace_back(node_id, port); }
};

/// The stage over PipelineCollaborators' rewrite (node N at proxy.local:19000+N) and metrics.
struct Fixture {
  kproxy::testing::PipelineCollaborators with;
  RecordingOpener opener;
  cluster::BrokerAddressStage stage{with.rewrite, opener, with.services.metrics};
  stage::ConnectionInfo info{1, "l", 0, nullptr, {}};
};

codec::MetadataResponse one_broker(int32_t node_id, const char* host) {
  codec::MetadataResponse m;
  m.brokers.resize(1);
  m.brokers[0].node_id = node_id;
  m.brokers[0].host = host;
  m.brokers[0].port = 9092;
  return m;
}

int header_version(int16_t api_key, int16_t version) { return codec::response_header_version(api_key, version); }

codec::MetadataResponse decode_metadata(codec::Bytes frame, int16_t version) {
  codec::Bytes message = frame.subspan(4);
  codec::ResponseHeader h;
  REQUIRE(codec::read_response_header(message, header_version(codec::MetadataResponse::kApiKey, version), h, nullptr));
  codec::MetadataResponse m;
  codec::Reader r(message.subspan(h.size));
  m.read(r, version);
  REQUIRE_MESSAGE(r.ok(), r.error());
  return m;
}

constexpr int16_t kMetadata = codec::MetadataResponse::kApiKey;

}  // namespace

TEST_CASE("broker address stage: a Metadata response leaves naming kproxy's port, which the opener is asked to open") {
  Fixture f;
  const int16_t v = 12;
  auto frame = kproxy::testing::encoded_response_frame(one_broker(2, "10.0.0.2"), v);
  stage::ResponseContext ctx(kMetadata, v, header_version(kMetadata, v), codec::Bytes(frame), f.info);
  f.stage.on_response(ctx);

  CHECK_FALSE(ctx.closing());
  CHECK((ctx.changed_by() & stage::ResponseContext::bit(stage::StageId::kBrokerAddress)) != 0);
  auto got = decode_metadata(ctx.frame(), v);
  REQUIRE(got.brokers.size() == 1);
  CHECK(got.brokers[0].host == "proxy.local");
  CHECK(got.brokers[0].port == 19002);
  CHECK(f.opener.opened == std::vector<std::pair<int32_t, uint16_t>>{{2, 19002}});
  CHECK(f.with.services.metrics.total(metrics::ProxyEvent::kResponseRewritten) == 1);
  CHECK(f.with.services.metrics.total(metrics::ProxyEvent::kMalformedResponse) == 0);
  // The encoded frame is the rewritten one, not the broker's.
  auto sent = ctx.encode();
  CHECK(std::string(sent.begin(), sent.end()).find("10.0.0.2") == std::string::npos);
  CHECK(std::string(sent.begin(), sent.end()).find("proxy.local") != std::string::npos);
}

TEST_CASE("broker address stage: a Metadata body that does not decode closes the connection and counts a malformed response") {
  Fixture f;
  const int16_t v = 12;
  auto frame = kproxy::testing::encoded_response_frame(one_broker(2, "10.0.0.2"), v);
  frame.resize(frame.size() - 6);  // cut inside the body
  codec::Writer(frame).patch_int32(0, static_cast<int32_t>(frame.size() - 4));
  stage::ResponseContext ctx(kMetadata, v, header_version(kMetadata, v), codec::Bytes(frame), f.info);
  f.stage.on_response(ctx);

  REQUIRE(ctx.closing());
  CHECK(ctx.close_reason()->category == net::CloseCategory::kBrokerProtocolError);
  INFO(ctx.close_reason()->detail);
  CHECK(ctx.close_reason()->detail.find("Metadata v12") != std::string::npos);
  CHECK(ctx.changed_by() == 0);
  CHECK(f.opener.opened.empty());
  CHECK(f.with.services.metrics.total(metrics::ProxyEvent::kMalformedResponse) == 1);
  CHECK(f.with.services.metrics.total(metrics::ProxyEvent::kResponseRewritten) == 0);
}

TEST_CASE("broker address stage: a version kproxy does not know closes the connection rather than leak the broker's address") {
  Fixture f;
  auto frame = kproxy::testing::encoded_response_frame(one_broker(1, "10.0.0.1"), 12);
  stage::ResponseContext ctx(kMetadata, 99, /*header_version=*/-1, codec::Bytes(frame), f.info);
  f.stage.on_response(ctx);

  REQUIRE(ctx.closing());
  CHECK(ctx.close_reason()->category == net::CloseCategory::kBrokerProtocolError);
  INFO(ctx.close_reason()->detail);
  CHECK(ctx.close_reason()->detail.find("version unknown to kproxy") != std::string::npos);
  CHECK(ctx.close_reason()->detail.find("Metadata v99") != std::string::npos);
  CHECK(f.opener.opened.empty());
}

TEST_CASE("broker address stage: kproxy's own (synthetic) answers are left alone") {
  Fixture f;
  const int16_t v = 12;
  auto frame = kproxy::testing::encoded_response_frame(one_broker(1, "10.0.0.1"), v);
  stage::ExchangeActions actions;
  stage::ResponseContext ctx(kMetadata, v, header_version(kMetadata, v), codec::Bytes(frame), f.info, actions, /*synthetic=*/true,
                             std::chrono::nanoseconds(0));
  f.stage.on_response(ctx);

  CHECK_FALSE(ctx.closing());
  CHECK(ctx.changed_by() == 0);
  CHECK(ctx.frame().data() == frame.data());
  CHECK(f.opener.opened.empty());
  CHECK(f.with.services.metrics.total(metrics::ProxyEvent::kResponseRewritten) == 0);
}

TEST_CASE("broker address stage: a Produce response without NodeEndpoints keeps its bytes, and its scan is handed to later stages") {
  Fixture f;
  const int16_t v = 10;
  codec::ProduceResponse p;
  p.responses.resize(1);
  p.responses[0].name = "orders";
  p.responses[0].partition_responses.resize(1);
  p.responses[0].partition_responses[0].error_code = 6;  // NOT_LEADER_OR_FOLLOWER
  auto frame = kproxy::testing::encoded_response_frame(p, v);
  const int16_t produce = codec::ProduceResponse::kApiKey;
  stage::ResponseContext ctx(produce, v, header_version(produce, v), codec::Bytes(frame), f.info);
  f.stage.on_response(ctx);

  CHECK_FALSE(ctx.closing());
  CHECK(ctx.changed_by() == 0);
  CHECK(ctx.frame().data() == frame.data());
  CHECK(ctx.encode() == frame);
  const codec::ResponseScan* scan = ctx.scan();
  REQUIRE(scan != nullptr);
  REQUIRE(scan->error_count == 1);
  CHECK(scan->errors[0].code == 6);
  CHECK(f.with.services.metrics.total(metrics::ProxyEvent::kResponseRewritten) == 0);
}

TEST_CASE("broker address stage: wants only the responses that can name brokers, and no request") {
  CHECK(cluster::BrokerAddressStage::wants_response(kMetadata));
  CHECK(cluster::BrokerAddressStage::wants_response(static_cast<int16_t>(codec::ApiKey::kFindCoordinator)));
  CHECK(cluster::BrokerAddressStage::wants_response(static_cast<int16_t>(codec::ApiKey::kDescribeCluster)));
  CHECK_FALSE(cluster::BrokerAddressStage::wants_response(static_cast<int16_t>(codec::ApiKey::kListGroups)));
  CHECK_FALSE(cluster::BrokerAddressStage::wants_request(kMetadata));

  // A response of an API it does not want passes untouched even when handed to it.
  Fixture f;
  std::vector<uint8_t> list_groups = {0, 0, 0, 10, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0};
  stage::ResponseContext ctx(static_cast<int16_t>(codec::ApiKey::kListGroups), 0, 0, codec::Bytes(list_groups), f.info);
  f.stage.on_response(ctx);
  CHECK_FALSE(ctx.closing());
  CHECK(ctx.changed_by() == 0);
}
