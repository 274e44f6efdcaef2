#include "proxy/metrics/topic_names.h"

#include <cstring>
#include <mutex>

namespace kproxy::metrics {

size_t TopicNames::UuidHash::operator()(const codec::Uuid& u) const {
  uint64_t a, b;
  std::memcpy(&a, u.data(), 8);
  std::memcpy(&b, u.data() + 8, 8);
  return std::hash<uint64_t>{}(a ^ (b * 0x9e3779b97f4a7c15ULL));
}

void TopicNames::learn(const codec::Uuid& id, std::string_view name) {
  if (id == codec::Uuid{} || name.empty()) return;
  {
    std::shared_lock lock(mutex_);
    auto it = names_.find(id);
    if (it != names_.end() && it->second == name) return;  // the usual case: nothing new
  }
  std::unique_lock lock(mutex_);
  auto [it, inserted] = names_.insert_or_assign(id, std::string(name));
  if (!inserted) return;
  order_.push_back(id);
  if (names_.size() > max_entries_) {
    size_t forget = names_.size() - max_entries_ / 2;
    for (size_t i = 0; i < forget && !order_.empty(); ++i) {
      names_.erase(order_.front());
      order_.pop_front();
    }
  }
}

std::optional<std::string> TopicNames::name(const codec::Uuid& id) const {
  std::shared_lock lock(mutex_);
  auto it = names_.find(id);
  if (it == names_.end()) return std::nullopt;
  return it->second;
}

size_t TopicNames::size() const {
  std::shared_lock lock(mutex_);
  return names_.size();
}

}  // namespace kproxy::metrics
