#include "proxy/stage/frame_observer.h"

namespace kproxy::stage {

std::shared_ptr<FrameObserver> or_no_observer(std::shared_ptr<FrameObserver> observer) {
  static const auto nothing = std::make_shared<FrameObserver>();  // every method does nothing
  return observer ? std::move(observer) : nothing;
}

}  // namespace kproxy::stage
