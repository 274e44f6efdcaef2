// TopicIdsStage: every Metadata response (v10+) that passes teaches the process's TopicNames the
// ids of the topics it names; kproxy's own answers and other APIs teach nothing.
#include "proxy/cluster/topic_ids_stage.h"

#include <vector>

#include <doctest/doctest.h>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/response_header.h"
#include "proxy/cluster/topic_names.h"
#include "proxy/stage/frame_context.h"
#include "tests/unit/support/frames.h"

using namespace kproxy;

namespace {

codec::Uuid id_of(uint8_t seed) {
  codec::Uuid u{};
  for (size_t i = 0; i < u.size(); ++i) u[i] = static_cast<uint8_t>(seed + i);
  return u;
}

/// A Metadata response naming `orders` (id 1..) and `payments` (id 40..).
codec::MetadataResponse two_topics() {
  codec::MetadataResponse m;
  m.topics.resize(2);
  m.topics[0].name = "orders";
  m.topics[0].topic_id = id_of(1);
  m.topics[1].name = "payments";
  m.topics[1].topic_id = id_of(40);
  return m;
}

constexpr int16_t kMetadata = codec::MetadataResponse::kApiKey;

/// Runs `frame` (a Metadata response at `version`) through a TopicIdsStage over `names`.
void pass(cluster::TopicIdsStage& stage, const std::vector<uint8_t>& frame, int16_t version, bool synthetic = false) {
  stage::ConnectionInfo info{1, "l", 0, nullptr, {}};
  stage::ExchangeActions actions;
  stage::ResponseContext ctx(kMetadata, version, codec::response_header_version(kMetadata, version), codec::Bytes(frame), info, actions,
                             synthetic, std::chrono::nanoseconds(0));
  stage.on_response(ctx);
  CHECK_FALSE(ctx.closing());     // it never closes
  CHECK(ctx.changed_by() == 0u);  // nor changes the frame
}

}  // namespace

TEST_CASE("topic ids stage: a Metadata v12 response teaches every topic's id and name") {
  cluster::TopicNames names;
  cluster::TopicIdsStage stage(names);
  pass(stage, kproxy::testing::encoded_response_frame(two_topics(), 12), 12);
  CHECK(names.size() == 2);
  CHECK(names.name(id_of(1)) == "orders");
  CHECK(names.name(id_of(40)) == "payments");
  CHECK_FALSE(names.name(id_of(7)));
}

TEST_CASE("topic ids stage: a later Metadata response renames an id; versions before topic ids (v9) teach nothing") {
  cluster::TopicNames names;
  cluster::TopicIdsStage stage(names);
  pass(stage, kproxy::testing::encoded_response_frame(two_topics(), 9), 9);
  CHECK(names.size() == 0);

  pass(stage, kproxy::testing::encoded_response_frame(two_topics(), 10), 10);
  CHECK(names.name(id_of(1)) == "orders");
  codec::MetadataResponse renamed = two_topics();
  renamed.topics[0].name = "orders-v2";  // the topic was deleted and its id reused (a later name wins)
  pass(stage, kproxy::testing::encoded_response_frame(renamed, 13), 13);
  CHECK(names.name(id_of(1)) == "orders-v2");
}

TEST_CASE("topic ids stage: kproxy's own Metadata answers teach nothing; it wants Metadata responses only") {
  cluster::TopicNames names;
  cluster::TopicIdsStage stage(names);
  pass(stage, kproxy::testing::encoded_response_frame(two_topics(), 12), 12, /*synthetic=*/true);
  CHECK(names.size() == 0);

  CHECK(cluster::TopicIdsStage::wants_response(kMetadata));
  CHECK_FALSE(cluster::TopicIdsStage::wants_response(static_cast<int16_t>(codec::ApiKey::kProduce)));
  CHECK_FALSE(cluster::TopicIdsStage::wants_request(kMetadata));
}

TEST_CASE("topic ids stage: a Metadata body that does not decode teaches nothing and does not close") {
  cluster::TopicNames names;
  cluster::TopicIdsStage stage(names);
  auto frame = kproxy::testing::encoded_response_frame(two_topics(), 12);
  frame.resize(frame.size() - 3);
  codec::Writer w(frame);
  w.patch_int32(0, static_cast<int32_t>(frame.size() - 4));
  pass(stage, frame, 12);
  CHECK(names.size() == 0);
}
