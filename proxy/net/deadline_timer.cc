#include "proxy/net/deadline_timer.h"

namespace kproxy::net {

DeadlineTimer::DeadlineTimer(uv_loop_t* loop, const util::Clock& clock, std::function<void()> on_fire)
    : loop_(loop), clock_(clock), on_fire_(std::move(on_fire)) {}

DeadlineTimer::~DeadlineTimer() = default;  // the UvHandle closes the timer

void DeadlineTimer::cancel() { handle_.reset(); }

void DeadlineTimer::arm(util::Clock::time_point at) { arm_after(at - clock_.now()); }

void DeadlineTimer::arm_after(std::chrono::nanoseconds after) {
  if (!handle_.open()) {
    handle_.reset();  // a handle closed by libuv's own shutdown walk is let go first
    handle_.init(loop_, this, uv_timer_init);
  }
  // libuv counts the wait from its cached loop time, which is as old as the loop turn: refreshed
  // first, or a timer armed late in a long turn (or before the loop first ran) fires that much early.
  uv_update_time(loop_);
  // +1: libuv's clock is in whole milliseconds, so a truncated wait could fire just early.
  auto ms = after.count() > 0 ? std::chrono::duration_cast<std::chrono::milliseconds>(after).count() + 1 : 0;
  uv_timer_start(handle_.get(), on_timer, static_cast<uint64_t>(ms), 0);
}

void DeadlineTimer::on_timer(uv_timer_t* t) {
  if (auto* self = static_cast<DeadlineTimer*>(t->data)) self->on_fire_();
}

}  // namespace kproxy::net
