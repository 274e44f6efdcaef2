#include "proxy/net/deadline_timer.h"

namespace kproxy::net {

uint64_t loop_wait_ms(std::chrono::nanoseconds after) {
  if (after.count() <= 0) return 0;
  // Rounded up, +2: libuv's loop time is in whole milliseconds (up to 1 ms behind, truncated) and, where the
  // kernel's CLOCK_MONOTONIC_COARSE ticks every millisecond, libuv reads that clock, which lags the
  // precise one by up to another millisecond (libuv src/unix/linux.c, uv__hrtime with
  // UV_CLOCK_FAST): with +1 a wait could end up to 1 ms before its deadline on such a kernel.
  return static_cast<uint64_t>(std::chrono::ceil<std::chrono::milliseconds>(after).count() + 2);
}

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
  uv_timer_start(handle_.get(), on_timer, loop_wait_ms(after), 0);
}

void DeadlineTimer::on_timer(uv_timer_t* t) {
  if (auto* self = static_cast<DeadlineTimer*>(t->data)) self->on_fire_();
}

}  // namespace kproxy::net
