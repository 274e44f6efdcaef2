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

std::shared_ptr<FrameObserver> frame_observer() {
  std::lock_guard lock(observer_mutex);
  return observer_instance;
}

}  // namespace kproxy::proxy
