#include "proxy/cluster/topic_names.h"

#include <cstring>
#include <mutex>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages/metadata.h"

namespace kproxy::cluster {

namespace {
constexpr int16_t kFirstVersionWithTopicIds = 10;  // MetadataResponse TopicId: v10+ (KIP-516)
}  // namespace

size_t TopicNames::Hash::operator()(const codec::Uuid& u) const {
  uint64_t a, b;
  std::memcpy(&a, u.data(), 8);
  std::memcpy(&b, u.data() + 8, 8);
  return static_cast<size_t>(a ^ (b * 0x9e3779b97f4a7c15ULL));
}

void TopicNames::learn(const codec::Uuid& id, std::string_view name) {
  if (id == codec::Uuid{} || name.empty()) return;
  {
    std::shared_lock lock(mutex_);
    auto it = names_.find(id);
    if (it != names_.end() && it->second == name) return;  // the common case: known already
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

std::optional<std::string> TopicNames::name(std::string_view raw_id) const {
  codec::Uuid id;
  if (raw_id.size() != id.size()) return std::nullopt;
  std::memcpy(id.data(), raw_id.data(), id.size());
  return name(id);
}

size_t TopicNames::size() const {
  std::shared_lock lock(mutex_);
  return names_.size();
}

size_t learn_topic_ids(const codec::Message& message, int16_t version, TopicNames& names) {
  if (message.api_key() != static_cast<int16_t>(codec::ApiKey::kMetadata) || message.is_request() || version < kFirstVersionWithTopicIds)
    return 0;
  const auto& metadata = static_cast<const codec::MetadataResponse&>(message);
  size_t before = names.size();
  for (const auto& t : metadata.topics) {
    if (t.error_code == 0 && t.name) names.learn(t.topic_id, *t.name);
  }
  return names.size() - before;
}

}  // namespace kproxy::cluster
