// CountedBatches: the flat set of batch keys behind the tracker's "a batch sent again counts once"
// rule (the rule itself is tested through the tracker in transaction_tracker_test.cc).
#include "proxy/observe/counted_batches.h"

#include <doctest/doctest.h>

#include <random>
#include <unordered_map>

using kproxy::observe::CountedBatches;

TEST_CASE("a batch is found with the connection that sent it first, and not added twice") {
  CountedBatches set;
  CHECK(set.find(42) == nullptr);
  CHECK(set.add(42, 7));
  CHECK_FALSE(set.add(42, 9));  // sent again on another connection: still the first one's
  REQUIRE(set.find(42) != nullptr);
  CHECK(*set.find(42) == 7);
  CHECK(set.size() == 1);
  CHECK(set.find(43) == nullptr);
}

TEST_CASE("key 0 is a key like any other (the empty-slot marker is not visible)") {
  CountedBatches set;
  CHECK(set.find(0) == nullptr);
  CHECK(set.add(0, 3));
  REQUIRE(set.find(0) != nullptr);
  CHECK(*set.find(0) == 3);
  CHECK(set.size() == 1);
}

TEST_CASE("it agrees with a hash map over many keys, across growth and colliding low bits") {
  CountedBatches set;
  std::unordered_map<uint64_t, uint64_t> reference;
  std::mt19937_64 random(20261206);
  for (uint64_t i = 0; i < 5000; ++i) {
    // Half the keys share their low 16 bits: long probe runs, the worst case of linear probing.
    uint64_t key = (i % 2 == 0) ? random() : (random() << 16);
    uint64_t connection = i % 5;
    bool fresh = reference.emplace(key, connection).second;
    CHECK(set.add(key, connection) == fresh);
  }
  CHECK(set.size() == reference.size());
  for (const auto& [key, connection] : reference) {
    const uint64_t* found = set.find(key);
    REQUIRE(found != nullptr);
    CHECK(*found == connection);
  }
  for (int i = 0; i < 1000; ++i) {
    uint64_t key = random();
    CHECK((set.find(key) != nullptr) == reference.contains(key));
  }
}

TEST_CASE("clear forgets every batch, small or grown, and the set works again after it") {
  CountedBatches set;
  for (uint64_t k = 1; k <= 5; ++k) set.add(k, 1);
  set.clear();
  CHECK(set.empty());
  for (uint64_t k = 1; k <= 5; ++k) CHECK(set.find(k) == nullptr);
  for (uint64_t k = 1; k <= 3000; ++k) set.add(k * 0x9e3779b97f4a7c15ULL, 2);  // grows past the kept size
  CHECK(set.size() == 3000);
  set.clear();
  CHECK(set.empty());
  CHECK(set.find(0x9e3779b97f4a7c15ULL) == nullptr);
  CHECK(set.add(5, 4));
  CHECK(*set.find(5) == 4);
}

TEST_CASE("past kMaxBatches a batch is refused, and the ones before stay") {
  CountedBatches set;
  for (uint64_t k = 1; k <= CountedBatches::kMaxBatches; ++k) REQUIRE(set.add(k * 0x9e3779b97f4a7c15ULL, 1));
  CHECK(set.size() == CountedBatches::kMaxBatches);
  CHECK_FALSE(set.add(12345, 1));
  CHECK(set.find(12345) == nullptr);
  CHECK(set.find(0x9e3779b97f4a7c15ULL) != nullptr);
}
