// TopicNames: topic id -> topic name, learned from the Metadata responses passing through kproxy,
// so that `topic:` globs of fault rules match requests that name topics by id (KIP-516: Produce
// v13+, Fetch v13+) and the per-topic error scopes of their responses.
//
//   Metadata response (v10+: Name + TopicId per topic) ──► Pipeline::on_response ──► learn()
//   Produce v13 request (TopicId only) ──► Pipeline::matches ──► name(id) ──► glob
//
// One map per process, shared by every worker (a topic's id is the same on every connection):
// writers take an exclusive lock, lookups a shared one. A topic kproxy has not seen in a Metadata
// response yet has no name here; a rule with `topic:` then does not match it (clients fetch
// metadata for a topic before they produce to or fetch from it, so in practice it is known).
// Ids of deleted topics stay (bounded by the number of topics ever seen; a re-created topic gets
// a new id).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "codec/message.h"

namespace kproxy::chaos {

class TopicNames {
 public:
  /// Records `name` for `id`; the zero id (no id: Metadata < v10, an error entry) is ignored.
  void learn(const codec::Uuid& id, std::string_view name);
  /// The name of `id`, when known.
  std::optional<std::string> name(const codec::Uuid& id) const;
  /// The same for an id given as its 16 raw bytes (EntityKind::kTopicId); nullopt for any other size.
  std::optional<std::string> name(std::string_view raw_id) const;
  size_t size() const;

  /// The process-wide map every pipeline uses.
  static TopicNames& shared();

 private:
  struct Hash {
    size_t operator()(const codec::Uuid& u) const;
  };
  mutable std::shared_mutex mutex_;
  std::unordered_map<codec::Uuid, std::string, Hash> names_;
};

/// Learns every (id, name) pair of a decoded MetadataResponse (api key 3) at `version`; other
/// messages are ignored. Returns how many pairs were new.
size_t learn_topic_ids(const codec::Message& metadata_response, int16_t version, TopicNames& names);

}  // namespace kproxy::chaos
