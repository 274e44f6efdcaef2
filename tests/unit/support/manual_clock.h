// ManualClock: a util::Clock a test moves by hand (advance), so that what depends on time is
// tested without sleeping.
#pragma once

#include <atomic>
#include <chrono>

#include "proxy/util/clock.h"

namespace kproxy::testing {

class ManualClock final : public util::Clock {
 public:
  /// Starts at the steady clock's now, so that times compared with real ones stay plausible.
  ManualClock() : now_(std::chrono::steady_clock::now().time_since_epoch().count()) {}
  time_point now() const override { return time_point(std::chrono::steady_clock::duration(now_.load())); }
  void advance(std::chrono::steady_clock::duration by) { now_ += by.count(); }

 private:
  std::atomic<std::chrono::steady_clock::duration::rep> now_;
};

}  // namespace kproxy::testing
