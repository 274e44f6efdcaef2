#include "proxy/net/deadline_timer.h"

namespace kproxy::proxy {

DeadlineTimer::DeadlineTimer(uv_loop_t* loop, std::function<void()> on_fire) : loop_(loop), on_fire_(std::move(on_fire)) {}

DeadlineTimer::~DeadlineTimer() = default;  // the UvHandle closes the timer

void DeadlineTimer::cancel() { handle_.reset(); }

void DeadlineTimer::arm(std::chrono::steady_clock::time_point at) {
  if (!handle_.open()) {
    handle_.reset();  // a handle closed by libuv's own shutdown walk is let go first
    handle_.init(loop_, this, uv_timer_init);
  }
  // libuv counts the wait from its cached loop time, which is as old as the loop turn: refreshed
  // first, or a timer armed late in a long turn (or before the loop first ran) fires that much early.
  uv_update_time(loop_);
  auto now = std::chrono::steady_clock::now();
  // +1: libuv's clock is in whole milliseconds, so a truncated wait could fire just early.
  auto ms = at > now ? std::chrono::duration_cast<std::chrono::milliseconds>(at - now).count() + 1 : 0;
  uv_timer_start(handle_.get(), on_timer, static_cast<uint64_t>(ms), 0);
}

void DeadlineTimer::on_timer(uv_timer_t* t) {
  if (auto* self = static_cast<DeadlineTimer*>(t->data)) self->on_fire_();
}

}  // namespace kproxy::proxy
