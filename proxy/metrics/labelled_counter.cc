#include "proxy/metrics/labelled_counter.h"

namespace kproxy::metrics {

LabelledCounter::LabelledCounter(std::string name, std::string help, std::string label, std::vector<std::string> values)
    : name_(std::move(name)), help_(std::move(help)), label_(std::move(label)), values_(std::move(values)) {
  if (label_.empty()) values_ = {""};  // one series, no label
  counts_ = std::make_unique<std::atomic<uint64_t>[]>(values_.size());
}

void LabelledCounter::add(size_t index, uint64_t n) {
  if (index < values_.size()) counts_[index].fetch_add(n, std::memory_order_relaxed);
}

uint64_t LabelledCounter::value(size_t index) const { return index < values_.size() ? counts_[index].load(std::memory_order_relaxed) : 0; }

prometheus::MetricFamily LabelledCounter::family() const {
  prometheus::MetricFamily f;
  f.name = name_;
  f.help = help_;
  f.type = prometheus::MetricType::Counter;
  for (size_t i = 0; i < values_.size(); ++i) {
    prometheus::ClientMetric m;
    if (!label_.empty()) m.label.push_back({label_, values_[i]});
    m.counter.value = static_cast<double>(value(i));
    f.metric.push_back(std::move(m));
  }
  return f;
}

}  // namespace kproxy::metrics
