#include "proxy/deadline_timer.h"

namespace kproxy::proxy {

struct DeadlineTimer::Handle {
  uv_timer_t timer;
  DeadlineTimer* owner = nullptr;  ///< null once cancelled: the close callback only frees
};

DeadlineTimer::DeadlineTimer(uv_loop_t* loop, std::function<void()> on_fire)
    : loop_(loop), on_fire_(std::move(on_fire)) {}

DeadlineTimer::~DeadlineTimer() { cancel(); }

void DeadlineTimer::cancel() {
  if (!handle_) return;
  handle_->owner = nullptr;
  uv_timer_stop(&handle_->timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_->timer),
           [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
  handle_ = nullptr;
}

void DeadlineTimer::arm(std::chrono::steady_clock::time_point at) {
  if (!handle_) {
    handle_ = new Handle;
    handle_->owner = this;
    uv_timer_init(loop_, &handle_->timer);
    handle_->timer.data = handle_;
  }
  auto now = std::chrono::steady_clock::now();
  // +1: libuv's clock is in whole milliseconds, so a truncated wait could fire just early.
  auto ms = at > now ? std::chrono::duration_cast<std::chrono::milliseconds>(at - now).count() + 1 : 0;
  uv_timer_start(&handle_->timer, [](uv_timer_t* t) {
    auto* h = static_cast<Handle*>(t->data);
    if (h->owner) h->owner->on_fire_();
  }, static_cast<uint64_t>(ms), 0);
}

}  // namespace kproxy::proxy
