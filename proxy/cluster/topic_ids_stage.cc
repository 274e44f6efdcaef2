#include "proxy/cluster/topic_ids_stage.h"

#include "codec/generated/api_keys.h"
#include "proxy/cluster/topic_names.h"
#include "proxy/stage/frame_context.h"

namespace kproxy::cluster {

void TopicIdsStage::on_response(stage::ResponseContext& ctx) {
  if (ctx.api_key() != static_cast<int16_t>(codec::ApiKey::kMetadata) || ctx.synthetic()) return;
  if (auto m = ctx.message()) learn_topic_ids(*m, ctx.body_version(), names_);
}

}  // namespace kproxy::cluster
