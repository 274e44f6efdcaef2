// TopicNames: topic id → name, learnt from the Metadata responses kproxy forwards, so that the
// opt-in topic label can name the topics of requests that carry only ids (Fetch v13+, Produce
// v13+; KIP-516 topic ids). Process-wide: a client's Metadata and Fetch may be served by different
// workers. Bounded: past max_entries the oldest half is forgotten (a forgotten id is learnt again
// from the client's next Metadata refresh).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "codec/reader.h"

namespace kproxy::metrics {

class TopicNames {
 public:
  explicit TopicNames(size_t max_entries = 100000) : max_entries_(max_entries) {}

  /// Remembers `name` for `id` (an all-zero id means "none" and is ignored).
  void learn(const codec::Uuid& id, std::string_view name);
  /// The name last learnt for `id`, or nullopt.
  std::optional<std::string> name(const codec::Uuid& id) const;
  size_t size() const;

 private:
  struct UuidHash {
    size_t operator()(const codec::Uuid& u) const;
  };
  size_t max_entries_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<codec::Uuid, std::string, UuidHash> names_;
  std::deque<codec::Uuid> order_;  ///< insertion order, for forgetting the oldest
};

}  // namespace kproxy::metrics
