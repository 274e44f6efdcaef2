// LogThrottle: at most one log line per interval for an event a peer can repeat at will (a
// misconfigured cluster makes every client attempt fail the same way; a full fd table fails every
// accept). The first occurrence always logs; later ones within the interval are only counted, and
// the next line that logs says how many were left out. Thread-safe; the event's metric counts
// every occurrence either way.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "proxy/util/clock.h"

namespace kproxy::util {

class LogThrottle {
 public:
  /// `clock`: where the interval is measured (a test's ManualClock); it must outlive the throttle.
  explicit LogThrottle(std::chrono::milliseconds interval, const util::Clock& clock = util::steady_clock())
      : clock_(&clock), interval_ms_(interval.count()) {}

  /// True when this occurrence should be logged. `*suppressed` (if given) receives how many
  /// occurrences were not logged since the last line that was.
  bool allow(uint64_t* suppressed = nullptr) {
    int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(clock_->now().time_since_epoch()).count();
    int64_t last = last_ms_.load(std::memory_order_relaxed);
    if (last != kNever && now - last < interval_ms_) {
      skipped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (!last_ms_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      skipped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    uint64_t n = skipped_.exchange(0, std::memory_order_relaxed);
    if (suppressed) *suppressed = n;
    return true;
  }

  /// " (N more since the last such line)" for a line logged after `suppressed` were not; "" for 0.
  static std::string suppressed_note(uint64_t suppressed) {
    return suppressed ? " (" + std::to_string(suppressed) + " more since the last such line)" : std::string();
  }

 private:
  static constexpr int64_t kNever = INT64_MIN;
  const util::Clock* clock_;
  int64_t interval_ms_;
  std::atomic<int64_t> last_ms_{kNever};
  std::atomic<uint64_t> skipped_{0};
};

}  // namespace kproxy::util
