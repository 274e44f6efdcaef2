// Clock: where code that decides by time (deadlines, delays, how long something took) reads
// "now". kproxy reads it from the one SteadyClock the process's services own
// (proxy/services/process_services.h); a unit test hands in tests/unit/support/manual_clock.h and
// moves time itself instead of sleeping.
#pragma once

#include <chrono>

namespace kproxy::util {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  /// Now, on the monotonic clock (never goes back).
  virtual time_point now() const = 0;
};

/// std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
};

/// The steady clock, for what no service reaches (a function-local LogThrottle); immutable.
inline const Clock& steady_clock() {
  static const SteadyClock clock;
  return clock;
}

}  // namespace kproxy::util
