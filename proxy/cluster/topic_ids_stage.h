// TopicIdsStage: learns topic id -> name from every Metadata response (KIP-516), so that fault
// rules with `topic:` and the topic metric label work on requests that name topics only by id
// (Produce v13+, Fetch v13+). The map is process-wide: proxy/cluster/topic_names.h.
#pragma once

#include "codec/generated/api_keys.h"
#include "proxy/cluster/topic_names.h"
#include "proxy/stage/services.h"
#include "proxy/stage/stage.h"

namespace kproxy::cluster {

class TopicIdsStage final : public stage::Stage {
 public:
  /// Learns into `names` the topic ids every Metadata response (v10+) names.
  explicit TopicIdsStage(TopicNames& names) : names_(names) {}
  explicit TopicIdsStage(const stage::StageSetup& setup) : TopicIdsStage(setup.services.topic_names) {}
  stage::StageId id() const override { return stage::StageId::kTopicIds; }
  static bool wants_request(int16_t) { return false; }
  static bool wants_response(int16_t api_key) { return api_key == static_cast<int16_t>(codec::ApiKey::kMetadata); }
  void on_response(stage::ResponseContext& ctx) override;

 private:
  TopicNames& names_;
};

}  // namespace kproxy::cluster
