// The transactional Produce walk: what the tracker reads of a Produce request body, bounds-checked
// (the every-version and every-cut cases run through txn_request in transaction_events_test.cc).
#include "proxy/observe/transactional_produce.h"

#include <doctest/doctest.h>

#include <vector>

#include "codec/writer.h"
#include "tests/unit/support/record_batch.h"

using namespace kproxy;
using namespace kproxy::observe;
using kproxy::testing::batch;

namespace {

/// A Produce v9 (compact, tagged fields) body: `id` (nullopt: null), acks -1, one topic "out"
/// with one partition (index 4) holding `records`.
std::vector<uint8_t> produce_v9(const char* id, const std::vector<uint8_t>& records) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  if (id) {
    w.uvarint(static_cast<uint32_t>(std::char_traits<char>::length(id)) + 1);
    for (const char* c = id; *c; ++c) w.int8(*c);
  } else {
    w.uvarint(0);
  }
  w.int16(-1);     // acks
  w.int32(30000);  // timeout
  w.uvarint(2);    // one topic
  w.uvarint(4);    // "out"
  w.int8('o');
  w.int8('u');
  w.int8('t');
  w.uvarint(2);  // one partition
  w.int32(4);
  w.uvarint(static_cast<uint32_t>(records.size()) + 1);
  out.insert(out.end(), records.begin(), records.end());
  w.uvarint(0);  // partition tags
  w.uvarint(0);  // topic tags
  w.uvarint(0);  // request tags
  return out;
}

}  // namespace

TEST_CASE("transactional produce: the id, partitions, records and producer of a v9 body; not transactional when the id is null or empty") {
  auto records = batch(6, 501, 3);
  auto body = produce_v9("app-1", records);
  TxnRequest r;
  REQUIRE(read_transactional_produce(codec::Bytes(body.data(), body.size()), 9, r));
  CHECK(r.transactional_id == "app-1");
  CHECK(r.partitions == std::vector<PartitionRef>{{"out", 4}});
  CHECK(r.records == 6);
  CHECK(r.bytes == records.size());
  CHECK(r.producer_id == 501);
  CHECK(r.producer_epoch == 3);
  // The partition's first batch with its base sequence (0 in this batch): a resent batch is known by it.
  REQUIRE(r.batches.size() == 1);
  CHECK(r.batches[0].partition == PartitionRef{"out", 4});
  CHECK(r.batches[0].base_sequence == 0);
  CHECK(r.batches[0].records == 6);

  for (const char* id : {static_cast<const char*>(nullptr), ""}) {
    auto plain = produce_v9(id, records);
    TxnRequest p;
    CHECK_FALSE(read_transactional_produce(codec::Bytes(plain.data(), plain.size()), 9, p));
  }
  TxnRequest old;
  CHECK_FALSE(read_transactional_produce(codec::Bytes(body.data(), body.size()), 2, old));  // no TransactionalId before v3
}

TEST_CASE("transactional produce: counts larger than the body, overlong varints and lengths past the end stop the walk") {
  auto records = batch(1);
  auto body = produce_v9("app", records);
  const size_t topics_at = 1 + 3 + 2 + 4;  // id length, "app", acks, timeout
  auto huge = body;
  huge[topics_at] = 0xff;  // a topic count of ~2^28 in a body of ~100 bytes
  huge.insert(huge.begin() + static_cast<std::ptrdiff_t>(topics_at) + 1, {0xff, 0xff, 0x7f});
  TxnRequest r;
  CHECK_FALSE(read_transactional_produce(codec::Bytes(huge.data(), huge.size()), 9, r));
  CHECK(r.partitions.empty());

  auto endless = body;
  endless.resize(topics_at);
  endless.insert(endless.end(), 6, 0xff);  // a varint that never ends
  TxnRequest e;
  CHECK_FALSE(read_transactional_produce(codec::Bytes(endless.data(), endless.size()), 9, e));

  auto past = produce_v9("app", records);
  past.resize(past.size() - 5);  // the records' length says more than is left
  TxnRequest p;
  CHECK_FALSE(read_transactional_produce(codec::Bytes(past.data(), past.size()), 9, p));
}

TEST_CASE("transactional produce: a compact length past 2^31 is null, as Kafka's readers take it (found by fuzz_txn_produce)") {
  // v9: "app", acks, timeout, topic "out" with partition 4 whose records length is the uvarint
  // 0x80000001: N+1 read into an int32 gives a negative N, a null record set, not a length.
  std::vector<uint8_t> body = {4,   'a', 'p', 'p', 0xff, 0xff, 0,    0,    0x75, 0x30, 2,    4, 'o', 'u',
                               't', 2,   0,   0,   0,    4,    0x81, 0x80, 0x80, 0x80, 0x08, 0, 0,   0};
  TxnRequest r;
  REQUIRE(read_transactional_produce(codec::Bytes(body.data(), body.size()), 9, r));
  CHECK(r.partitions == std::vector<PartitionRef>{{"out", 4}});
  CHECK(r.records == 0);
  CHECK(r.bytes == 0);
}

TEST_CASE("transactional produce: records counted from v2 batch headers; what cannot be read is counted apart") {
  auto two = batch(3);
  auto second = batch(4);
  two.insert(two.end(), second.begin(), second.end());
  RecordCount c = count_records(codec::Bytes(two.data(), two.size()));
  CHECK(c.records == 7);
  CHECK(c.unreadable == 0);

  auto cut = batch(5);
  cut.resize(40);
  c = count_records(codec::Bytes(cut.data(), cut.size()));
  CHECK(c.records == 0);
  CHECK(c.unreadable == 1);

  auto old = batch(5);
  old[16] = 1;  // a v1 message set
  c = count_records(codec::Bytes(old.data(), old.size()));
  CHECK(c.unreadable == 1);
}

TEST_CASE("transactional produce: the first-field peek agrees with the full read on null, empty and set ids") {
  using kproxy::observe::produce_names_transaction;
  auto bytes = [](std::initializer_list<uint8_t> b) { return std::vector<uint8_t>(b); };
  // v3-v8: NULLABLE_STRING (int16 length).
  auto null16 = bytes({0xff, 0xff, 0, 1}), empty16 = bytes({0, 0, 0, 1}), set16 = bytes({0, 1, 't', 0});
  CHECK_FALSE(produce_names_transaction(null16, 3));
  CHECK_FALSE(produce_names_transaction(empty16, 8));
  CHECK(produce_names_transaction(set16, 8));
  // v9+: COMPACT_NULLABLE_STRING (unsigned varint of length + 1).
  auto null_c = bytes({0, 0}), empty_c = bytes({1, 0}), set_c = bytes({2, 't'}), long_c = bytes({0x81, 0x01});
  CHECK_FALSE(produce_names_transaction(null_c, 9));
  CHECK_FALSE(produce_names_transaction(empty_c, 12));
  CHECK(produce_names_transaction(set_c, 12));
  CHECK(produce_names_transaction(long_c, 13));  // a 128-byte id: a two-byte varint
  // v0-2 have no TransactionalId; a body too short to tell goes to the full read.
  CHECK_FALSE(produce_names_transaction(set16, 2));
  CHECK(produce_names_transaction(std::vector<uint8_t>{}, 9));
  CHECK(produce_names_transaction(bytes({0}), 3));
  // Wherever the peek says no, the full read says no too.
  for (const auto* body : {&null16, &empty16}) {
    kproxy::observe::TxnRequest r;
    CHECK_FALSE(kproxy::observe::read_transactional_produce(*body, 3, r));
  }
  for (const auto* body : {&null_c, &empty_c}) {
    kproxy::observe::TxnRequest r;
    CHECK_FALSE(kproxy::observe::read_transactional_produce(*body, 9, r));
  }
}
