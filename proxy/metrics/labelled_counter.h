#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

namespace kproxy::metrics {

/// A counter family of the metrics system whose series are one label over a fixed list of
/// values — kproxy_admin_refusals_total{status}, kproxy_proxy_broker_ports_refused_total{reason} —
/// or a single series when the label is empty (kproxy_tap_events_dropped_total). For events too
/// rare to need a per-thread shard (refusals, drops): one relaxed atomic per value, any thread
/// may count. Made by ProxyMetrics::labelled_counter, which exports it with every scrape.
class LabelledCounter {
 public:
  LabelledCounter(std::string name, std::string help, std::string label, std::vector<std::string> values);

  /// Counts `n` in the series of values[index] (an index past the list is ignored).
  void add(size_t index, uint64_t n = 1);
  uint64_t value(size_t index) const;
  const std::string& name() const { return name_; }
  /// The family as a scrape shows it, every series even at 0.
  prometheus::MetricFamily family() const;

 private:
  std::string name_, help_, label_;
  std::vector<std::string> values_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
};

}  // namespace kproxy::metrics
