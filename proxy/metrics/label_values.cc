#include "proxy/metrics/label_values.h"

#include "codec/generated/api_keys.h"

namespace kproxy::metrics {
namespace {

std::atomic<uint64_t> next_id{1};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

/// One thread's value → slot memory for one LabelValues (by id). Holds only values that got their
/// own slot, so it is bounded by max_values.
struct ThreadCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, void*, StringHash, std::equal_to<>> slots;
};
thread_local std::vector<ThreadCache> tls_caches;

}  // namespace

LabelValues::LabelValues(std::string family, std::string help, std::string label, size_t max_values)
    : id_(next_id.fetch_add(1)), family_(std::move(family)), help_(std::move(help)), label_(std::move(label)), max_values_(max_values) {
  other_ = &slots_.emplace_back(std::string(kOther));
}

LabelValues::Slot* LabelValues::resolve(std::string_view value) {
  ThreadCache* cache = nullptr;
  for (auto& c : tls_caches) {
    if (c.owner == id_) cache = &c;
  }
  if (!cache) {
    cache = &tls_caches.emplace_back();
    cache->owner = id_;
  }
  if (auto it = cache->slots.find(value); it != cache->slots.end()) return static_cast<Slot*>(it->second);
  if (value == kOther) return other_;
  Slot* slot = nullptr;
  if (full_.load(std::memory_order_acquire)) {
    // The index is final: read it without the lock.
    if (auto it = index_.find(value); it != index_.end()) slot = it->second;
  } else {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(value); it != index_.end()) {
      slot = it->second;
    } else if (index_.size() < max_values_) {
      slot = &slots_.emplace_back(std::string(value));
      index_.emplace(std::string(value), slot);
      if (index_.size() >= max_values_) full_.store(true, std::memory_order_release);
    }
  }
  if (!slot) {
    folded_.fetch_add(1, std::memory_order_relaxed);
    return other_;
  }
  cache->slots.emplace(std::string(value), slot);
  return slot;
}

void LabelValues::count(int16_t api, std::string_view value) {
  resolve(value)->counts[api_slot(api)].fetch_add(1, std::memory_order_relaxed);
}

prometheus::MetricFamily LabelValues::collect() const {
  prometheus::MetricFamily f;
  f.name = family_;
  f.help = help_;
  f.type = prometheus::MetricType::Counter;
  std::lock_guard lock(mutex_);
  for (const auto& slot : slots_) {
    for (size_t a = 0; a < kApiSlots; ++a) {
      uint64_t n = slot.counts[a].load(std::memory_order_relaxed);
      if (n == 0) continue;
      const char* name = a == kApiSlots - 1 ? "other" : codec::api_name(static_cast<int16_t>(a));
      prometheus::ClientMetric m;
      m.label = {{"api", name ? name : "unknown_" + std::to_string(a)}, {label_, slot.value}};
      m.counter.value = static_cast<double>(n);
      f.metric.push_back(std::move(m));
    }
  }
  return f;
}

uint64_t LabelValues::count_of(std::string_view value, int16_t api) const {
  std::lock_guard lock(mutex_);
  for (const auto& slot : slots_) {
    if (slot.value == value) return slot.counts[api_slot(api)].load(std::memory_order_relaxed);
  }
  return 0;
}

}  // namespace kproxy::metrics
