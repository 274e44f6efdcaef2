// TopicNames: topic id -> topic name, learned from the Metadata responses passing through kproxy,
// for whatever needs the name of a topic a request names only by id (KIP-516: Produce v13+,
// Fetch v13+): `topic:` globs of fault rules, the per-topic error scopes of their responses, and
// the opt-in topic label of the metrics.
//
//   Metadata response (v10+: Name + TopicId per topic) ──► Pipeline::on_response ──► learn_topic_ids()
//   Produce v13 request (TopicId only) ──► Pipeline::matches / FrameMetrics ──► name(id)
//
// One map per process, shared by every worker (a client's Metadata and its Fetch may be served by
// different workers; a topic's id is the same on every connection): writers take an exclusive
// lock, lookups a shared one. A topic kproxy has not seen in a Metadata response yet has no name
// here (clients fetch metadata for a topic before they produce to or fetch from it, so in practice
// it is known). Bounded: past max_entries the oldest half is forgotten (a forgotten id is learned
// again from the client's next Metadata refresh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "codec/message.h"

namespace kproxy::cluster {

class TopicNames {
 public:
  explicit TopicNames(size_t max_entries = 100000) : max_entries_(max_entries) {}

  /// Records `name` for `id` (a later name for the same id wins); the zero id (no id: Metadata
  /// < v10, an error entry) and an empty name are ignored.
  void learn(const codec::Uuid& id, std::string_view name);
  /// The name of `id`, when known.
  std::optional<std::string> name(const codec::Uuid& id) const;
  /// The same for an id given as its 16 raw bytes (EntityKind::kTopicId); nullopt for any other size.
  std::optional<std::string> name(std::string_view raw_id) const;
  size_t size() const;

 private:
  struct Hash {
    size_t operator()(const codec::Uuid& u) const;
  };
  size_t max_entries_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<codec::Uuid, std::string, Hash> names_;
  std::deque<codec::Uuid> order_;  ///< insertion order, for forgetting the oldest
};

/// Learns every (id, name) pair of a decoded MetadataResponse (api key 3) at `version`; other
/// messages are ignored. Returns how many pairs were new.
size_t learn_topic_ids(const codec::Message& metadata_response, int16_t version, TopicNames& names);

}  // namespace kproxy::cluster
