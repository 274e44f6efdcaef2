// DeadlineTimer: a one-shot libuv timer for an owner that may go away before libuv lets go.
//
// The handle is a UvHandle (proxy/net/uv_handle.h): destroying the DeadlineTimer, or cancel(),
// closes it and detaches the owner, so a callback already queued never reaches a dead object.
// The handle is allocated on the first arm() and released on cancel(): an owner that never needs
// a timer (most connections: the fault-rule holds and transport toxics it serves are rare) pays
// for an empty UvHandle, not a libuv handle.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>

#include "proxy/net/uv_handle.h"
#include "proxy/util/clock.h"

namespace kproxy::net {

/// The libuv timeout (whole milliseconds) that ends no earlier than `after` from now, on a loop
/// whose time was just refreshed with uv_update_time(); 0 when `after` is not positive.
uint64_t loop_wait_ms(std::chrono::nanoseconds after);

class DeadlineTimer {
 public:
  /// `on_fire` runs on the loop's thread each time an armed deadline passes; it may cancel or
  /// re-arm this timer, or destroy its owner (and with it this timer). `clock`: what a deadline
  /// given to arm() is read against (the process's services' clock; a test's ManualClock); it
  /// must outlive the timer.
  DeadlineTimer(uv_loop_t* loop, const util::Clock& clock, std::function<void()> on_fire);
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  /// Fires once at `at` on the timer's clock: after `at - clock.now()`, rounded up to the loop's
  /// millisecond clock (at the next loop turn if `at` has passed). Replaces a deadline armed before.
  void arm(util::Clock::time_point at);
  /// Fires once `after` from now (rounded up to whole milliseconds). Replaces a deadline armed before.
  void arm_after(std::chrono::nanoseconds after);
  /// Stops the timer and gives its handle back to libuv; arm() may be called again later.
  void cancel();
  /// True while a handle is allocated (between the first arm() and cancel()).
  bool allocated() const { return handle_.get() != nullptr; }

 private:
  static void on_timer(uv_timer_t* t);

  uv_loop_t* loop_;
  const util::Clock& clock_;
  std::function<void()> on_fire_;
  UvHandle<uv_timer_t> handle_;
};

}  // namespace kproxy::net
