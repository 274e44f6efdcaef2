#include "proxy/stage/stage.h"

#include <array>

namespace kproxy::stage {

std::string_view stage_name(StageId id) {
  static constexpr std::array<std::string_view, kStageCount> kNames = {
#define KPROXY_STAGE_NAME(id, name, type) name,
      KPROXY_STAGES(KPROXY_STAGE_NAME)
#undef KPROXY_STAGE_NAME
  };
  auto i = static_cast<size_t>(id);
  return i < kNames.size() ? kNames[i] : "unknown";
}

}  // namespace kproxy::stage
