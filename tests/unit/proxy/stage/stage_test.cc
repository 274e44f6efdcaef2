// The stage table: names, and which stages a request or response of an API passes (StageRoutes).
#include "proxy/stage/stage.h"

#include <doctest/doctest.h>

#include "codec/generated/api_keys.h"
#include "proxy/pipeline/pipeline.h"

using namespace kproxy;
using stage::StageId;
using stage::StageMask;
using stage::StageRoutes;

namespace {

StageMask bits(std::initializer_list<StageId> ids) {
  StageMask m = 0;
  for (StageId id : ids) m |= static_cast<StageMask>(1u << static_cast<size_t>(id));
  return m;
}

int16_t key(codec::ApiKey k) { return static_cast<int16_t>(k); }

}  // namespace

TEST_CASE("stage names are the metric labels, in table order") {
  CHECK(stage::stage_name(StageId::kBrokerAddress) == "broker_address");
  CHECK(stage::stage_name(StageId::kApiVersions) == "api_versions");
  CHECK(stage::stage_name(StageId::kTopicIds) == "topic_ids");
  CHECK(stage::stage_name(StageId::kFaultRules) == "fault_rules");
  CHECK(stage::stage_name(StageId::kObserver) == "observer");
  CHECK(stage::kStageCount == 5);
}

TEST_CASE("stage routes: a stage sees only the APIs it wants") {
  const StageRoutes& r = pipeline::stage_routes();
  const StageMask every =
      bits({StageId::kBrokerAddress, StageId::kApiVersions, StageId::kTopicIds, StageId::kFaultRules, StageId::kObserver});
  const StageMask rules_and_observer = bits({StageId::kFaultRules, StageId::kObserver});

  // A Produce passes two stages each way, plus the address rewrite on its response (NodeEndpoints, KIP-951).
  CHECK(r.for_request(key(codec::ApiKey::kProduce)) == rules_and_observer);
  CHECK(r.for_response(key(codec::ApiKey::kProduce)) == (rules_and_observer | bits({StageId::kBrokerAddress})));
  // Metadata names brokers and topic ids.
  CHECK(r.for_request(key(codec::ApiKey::kMetadata)) == rules_and_observer);
  CHECK(r.for_response(key(codec::ApiKey::kMetadata)) == (rules_and_observer | bits({StageId::kBrokerAddress, StageId::kTopicIds})));
  // ApiVersions: the KIP-511 name on the request, the version policy on the response.
  CHECK(r.for_request(key(codec::ApiKey::kApiVersions)) == (rules_and_observer | bits({StageId::kApiVersions})));
  CHECK(r.for_response(key(codec::ApiKey::kApiVersions)) == (rules_and_observer | bits({StageId::kApiVersions})));
  CHECK(r.for_response(key(codec::ApiKey::kFindCoordinator)) == (rules_and_observer | bits({StageId::kBrokerAddress})));
  // The transaction APIs: fault rules and the observer only.
  for (auto k :
       {codec::ApiKey::kInitProducerId, codec::ApiKey::kAddPartitionsToTxn, codec::ApiKey::kEndTxn, codec::ApiKey::kTxnOffsetCommit}) {
    CHECK(r.for_request(key(k)) == rules_and_observer);
    CHECK(r.for_response(key(k)) == rules_and_observer);
  }
  // Keys outside the table (a future API, a hostile frame) pass every stage, as before routes.
  CHECK(r.for_request(-1) == every);
  CHECK(r.for_response(StageRoutes::kApiKeys) == every);
  CHECK(r.for_request(32767) == every);
}

TEST_CASE("stage routes: every API of Kafka's table fits in it") {
  REQUIRE(!codec::all_api_keys().empty());
  for (int16_t k : codec::all_api_keys()) {
    INFO(k);
    CHECK(k >= 0);
    CHECK(static_cast<size_t>(k) < StageRoutes::kApiKeys);
  }
}
