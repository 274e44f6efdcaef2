// LabelValues: an opt-in metric label whose values come from traffic (topic names, client ids),
// capped so that a workload with many topics or clients cannot grow the scrape without bound.
//
//   worker thread ──count(api, "orders")──► its own cache (value → slot) ──► slot counters (atomic)
//                                  miss ──► registry (mutex): a new slot while fewer than
//                                           max_values exist, else the "other" slot + folded
//
// The first max_values distinct values get their own series; every later value is counted under
// "other", and folded() counts the requests counted so (not distinct values: remembering those
// would be the unbounded memory the cap avoids). A value literally named "other" shares that
// series. Once the registry is full it never changes again, so threads then look values up (and
// fold unknown ones) without the lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <prometheus/metric_family.h>

#include "proxy/metrics/proxy_metrics.h"

namespace kproxy::metrics {

class LabelValues {
 public:
  /// Series of `family` (a counter) carry labels {api, `label`}; at most `max_values` values.
  LabelValues(std::string family, std::string help, std::string label, size_t max_values);
  LabelValues(const LabelValues&) = delete;
  LabelValues& operator=(const LabelValues&) = delete;

  /// Counts one request of `api` under `value` (any thread).
  void count(int16_t api, std::string_view value);

  /// The family with one sample per (api, value) counted.
  prometheus::MetricFamily collect() const;

  const std::string& label() const { return label_; }
  size_t max_values() const { return max_values_; }
  /// Requests counted under "other" because the cap was reached.
  uint64_t folded() const { return folded_.load(std::memory_order_relaxed); }
  /// Count of `value` for `api` ("other" for the folded ones); for tests.
  uint64_t count_of(std::string_view value, int16_t api) const;

  static constexpr std::string_view kOther = "other";

 private:
  struct Slot {
    explicit Slot(std::string v) : value(std::move(v)) {}
    std::string value;
    std::array<std::atomic<uint64_t>, kApiSlots> counts{};
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Index = std::unordered_map<std::string, Slot*, StringHash, std::equal_to<>>;
  Slot* resolve(std::string_view value);

  const uint64_t id_;
  std::string family_, help_, label_;
  size_t max_values_;
  mutable std::mutex mutex_;
  Index index_;             ///< value → slot; under mutex_ until full_, then never written again
  std::deque<Slot> slots_;  ///< [0] = "other"; a deque: addresses stay valid as it grows
  Slot* other_;             ///< &slots_[0], read without the lock
  std::atomic<bool> full_{false};
  std::atomic<uint64_t> folded_{0};
};

}  // namespace kproxy::metrics
