#include "proxy/pipeline/stage.h"

namespace kproxy::proxy {

std::string_view stage_name(StageId id) {
  switch (id) {
    case StageId::kBrokerAddress: return "broker_address";
    case StageId::kApiVersions: return "api_versions";
    case StageId::kTopicIds: return "topic_ids";
    case StageId::kFaultRules: return "fault_rules";
    case StageId::kObserver: return "observer";
  }
  return "unknown";
}

}  // namespace kproxy::proxy
