#include "proxy/cluster/topic_names.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "codec/generated/messages/metadata.h"
#include "codec/generated/messages/produce.h"

using kproxy::cluster::TopicNames;
namespace codec = kproxy::codec;

namespace {
codec::Uuid id_of(uint8_t seed) {
  codec::Uuid u{};
  for (size_t i = 0; i < u.size(); ++i) u[i] = static_cast<uint8_t>(seed + i);
  return u;
}
std::string_view raw(const codec::Uuid& u) { return {reinterpret_cast<const char*>(u.data()), u.size()}; }
codec::Uuid id(uint8_t n) {
  codec::Uuid u{};
  u[15] = n;
  u[0] = 1;
  return u;
}
}  // namespace

TEST_CASE("topic names: learnt ids resolve, renames replace, the zero id is ignored") {
  TopicNames names;
  names.learn(id(1), "orders");
  names.learn(id(2), "payments");
  names.learn(codec::Uuid{}, "ignored");
  names.learn(id(3), "");
  CHECK(names.name(id(1)) == "orders");
  CHECK(names.name(id(2)) == "payments");
  CHECK_FALSE(names.name(codec::Uuid{}));
  CHECK_FALSE(names.name(id(3)));
  names.learn(id(1), "orders-v2");  // a topic recreated under the same id cannot happen, but a rename must win
  CHECK(names.name(id(1)) == "orders-v2");
  CHECK(names.size() == 2);
}

TEST_CASE("topic names: bounded, the oldest are forgotten first") {
  TopicNames names(10);
  for (uint8_t i = 1; i <= 11; ++i) names.learn(id(i), "t" + std::to_string(i));
  CHECK(names.size() <= 10);
  CHECK_FALSE(names.name(id(1)));
  CHECK(names.name(id(11)) == "t11");
}

TEST_CASE("topic ids are learned from Metadata v10+ responses, and only there") {
  TopicNames names;
  codec::MetadataResponse md;
  md.topics.resize(3);
  md.topics[0].name = "orders";
  md.topics[0].topic_id = id_of(1);
  md.topics[1].name = "missing";
  md.topics[1].error_code = 3;                                 // UNKNOWN_TOPIC_OR_PARTITION: its id is the zero id anyway
  md.topics[2].name = "no-id";                                 // zero id: not learned
  CHECK(kproxy::cluster::learn_topic_ids(md, 9, names) == 0);  // v9 has no TopicId
  CHECK(kproxy::cluster::learn_topic_ids(md, 12, names) == 1);
  CHECK(kproxy::cluster::learn_topic_ids(md, 12, names) == 0);  // known already
  CHECK(names.name(id_of(1)) == std::optional<std::string>("orders"));
  CHECK(names.name(raw(id_of(1))) == std::optional<std::string>("orders"));
  CHECK(!names.name(id_of(2)));
  CHECK(!names.name(std::string_view("short")));
  CHECK(names.size() == 1);
  // A re-created topic: the new id maps to the same name; the old id still answers.
  names.learn(id_of(7), "orders");
  CHECK(names.name(id_of(7)) == std::optional<std::string>("orders"));
  codec::MetadataRequest req;
  CHECK(kproxy::cluster::learn_topic_ids(req, 12, names) == 0);
}

TEST_CASE("Produce v13 names its topics by id: for_each_entity reports the id's raw bytes") {
  codec::ProduceRequest p;
  p.topic_data.resize(1);
  p.topic_data[0].topic_id = id_of(40);
  p.topic_data[0].partition_data.resize(1);
  p.topic_data[0].partition_data[0].index = 2;
  std::vector<std::string> ids;
  std::vector<int64_t> partitions;
  p.for_each_entity(13, [&](codec::EntityKind kind, std::string_view text, int64_t number) {
    if (kind == codec::EntityKind::kTopicId) ids.emplace_back(text);
    if (kind == codec::EntityKind::kPartition) partitions.push_back(number);
    CHECK(kind != codec::EntityKind::kTopicName);  // v13 has no Name
  });
  REQUIRE(ids.size() == 1);
  CHECK(ids[0] == raw(id_of(40)));
  CHECK(partitions == std::vector<int64_t>{2});
}
