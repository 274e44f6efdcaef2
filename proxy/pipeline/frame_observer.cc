#include "proxy/pipeline/frame_observer.h"

#include <mutex>

namespace kproxy::proxy {

namespace {
std::mutex observer_mutex;
std::shared_ptr<FrameObserver> observer_instance;
}  // namespace

void set_frame_observer(std::shared_ptr<FrameObserver> observer) {
  std::lock_guard lock(observer_mutex);
  observer_instance = std::move(observer);
}

std::shared_ptr<FrameObserver> or_no_observer(std::shared_ptr<FrameObserver> observer) {
  static const auto nothing = std::make_shared<FrameObserver>();  // every method does nothing
  return observer ? std::move(observer) : nothing;
}

std::shared_ptr<FrameObserver> frame_observer() {
  std::lock_guard lock(observer_mutex);
  return or_no_observer(observer_instance);
}

}  // namespace kproxy::proxy
