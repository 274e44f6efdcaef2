#include "codec/reader.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "codec/message_support.h"

using kproxy::codec::Reader;

TEST_CASE("Reader decodes fixed-width big-endian integers") {
  std::vector<uint8_t> b{0x01, 0x02, 0xff, 0xff, 0xff, 0xfe};
  Reader r(b);
  CHECK(r.int16() == 0x0102);
  CHECK(r.int32() == -2);
  CHECK(r.ok());
  CHECK(r.at_end());
}

TEST_CASE("Reader keeps its first error and reads zeros after it") {
  std::vector<uint8_t> b{0x00, 0x05, 'a', 'b'};
  Reader r(b);
  r.set_message("TestMessage", 3);
  r.set_field("Name");
  CHECK(r.string(false).empty());
  CHECK_FALSE(r.ok());
  CHECK(r.error() == "TestMessage v3: field Name at offset 2: string length 5 exceeds the 2 bytes left");
  CHECK(r.int32() == 0);
  CHECK(r.error().find("string length 5") != std::string::npos);
}

TEST_CASE("Reader rejects varints longer than five bytes") {
  std::vector<uint8_t> b{0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  Reader r(b);
  r.uvarint();
  CHECK_FALSE(r.ok());
}

TEST_CASE("Reader decodes zig-zag varints and varlongs") {
  std::vector<uint8_t> b{0x01, 0x02, 0x03, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  Reader r(b);
  CHECK(r.varint() == -1);
  CHECK(r.varint() == 1);
  CHECK(r.varint() == -2);
  CHECK(r.varlong() == INT64_MAX);
  CHECK(r.ok());
}

TEST_CASE("Reader bounds array counts by the bytes that remain") {
  std::vector<uint8_t> b{0x00, 0x00, 0x10, 0x00, 0x00};
  Reader r(b);
  r.array_length(false);
  CHECK_FALSE(r.ok());
}

TEST_CASE("Reader treats compact length 0 as null and rejects null where not nullable") {
  std::vector<uint8_t> b{0x00, 0x00};
  Reader r(b);
  CHECK_FALSE(r.nullable_string(true).has_value());
  CHECK(r.ok());
  r.string(true);
  CHECK_FALSE(r.ok());
}

// ---- caps on attacker-controlled sizes (issue #8, security): each boundary, both sides ----------

namespace {
std::vector<uint8_t> with_int16_length(int16_t n, size_t bytes) {
  std::vector<uint8_t> b{static_cast<uint8_t>(static_cast<uint16_t>(n) >> 8), static_cast<uint8_t>(n)};
  b.resize(2 + bytes, 'x');
  return b;
}
std::vector<uint8_t> with_uvarint(uint32_t v, size_t bytes) {
  std::vector<uint8_t> b;
  while (v >= 0x80) {
    b.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  b.push_back(static_cast<uint8_t>(v));
  b.resize(b.size() + bytes, 'x');
  return b;
}
}  // namespace

TEST_CASE("Reader caps strings at Kafka's 32767 bytes, classic and compact, even when the bytes are there") {
  using kproxy::codec::kMaxStringLength;
  auto classic = with_int16_length(kMaxStringLength, kMaxStringLength);
  Reader ok(classic);
  CHECK(ok.string(false).size() == static_cast<size_t>(kMaxStringLength));
  CHECK(ok.ok());
  // Compact lengths are uvarint length+1: 32768 bytes are on the wire, the cap refuses them.
  auto compact_ok = with_uvarint(kMaxStringLength + 1, kMaxStringLength);
  Reader c_ok(compact_ok);
  CHECK(c_ok.string(true).size() == static_cast<size_t>(kMaxStringLength));
  CHECK(c_ok.ok());
  auto compact_over = with_uvarint(kMaxStringLength + 2, kMaxStringLength + 1);
  Reader over(compact_over);
  CHECK(over.string(true).empty());
  CHECK(over.error().find("above Kafka's limit of 32767") != std::string::npos);
  Reader over_nullable(compact_over);
  CHECK_FALSE(over_nullable.nullable_string(true).has_value());
  CHECK_FALSE(over_nullable.ok());
  // int16 lengths above 32767 are negative: null, refused where the field is not nullable.
  auto negative = with_int16_length(-2, 10);
  Reader neg(negative);
  neg.string(false);
  CHECK(neg.error().find("null in a non-nullable field") != std::string::npos);
}

TEST_CASE("Reader bounds bytes and array counts by the bytes left: exactly enough passes, one more fails") {
  auto exact = with_uvarint(101, 100);  // compact bytes of 100
  Reader r(exact);
  CHECK(r.bytes(true).size() == 100);
  CHECK(r.at_end());
  auto short_by_one = with_uvarint(102, 100);
  Reader s(short_by_one);
  CHECK(s.bytes(true).empty());
  CHECK(s.error().find("length 101 exceeds the 100 bytes left") != std::string::npos);
  // A classic int32 byte length of 2^31-1 with 4 bytes behind it: refused before any allocation.
  std::vector<uint8_t> huge{0x7f, 0xff, 0xff, 0xff, 1, 2, 3, 4};
  Reader h(huge);
  CHECK(h.bytes(false).empty());
  CHECK_FALSE(h.ok());

  std::vector<uint8_t> count3{0, 0, 0, 3, 'a', 'b', 'c'};
  Reader a(count3);
  CHECK(a.array_length(false) == 3);
  std::vector<uint8_t> count4{0, 0, 0, 4, 'a', 'b', 'c'};
  Reader b(count4);
  CHECK(b.array_length(false) == 0);
  CHECK(b.error().find("array count 4 exceeds the 3 bytes left") != std::string::npos);
  // Compact count 2^32-1 (uvarint 0xffffffff - 1 as int32): negative, so null, never a huge count.
  auto compact_huge = with_uvarint(0xffffffffu, 3);
  Reader c(compact_huge);
  CHECK(c.array_length(true) == -1);
}

TEST_CASE("Reader::fixed_array refuses a count the bytes cannot hold without allocating") {
  std::vector<uint8_t> eight(8, 0);
  Reader r(eight);
  std::vector<int32_t> out;
  r.fixed_array(out, 3);  // 12 bytes needed, 8 left
  CHECK_FALSE(r.ok());
  CHECK(out.capacity() == 0);
  Reader ok(eight);
  ok.fixed_array(out, 2);
  CHECK(ok.ok());
  CHECK(out.size() == 2);
  Reader giant(eight);
  std::vector<int64_t> big;
  giant.fixed_array(big, SIZE_MAX / 4);  // count * sizeof would overflow: still refused
  CHECK_FALSE(giant.ok());
  CHECK(big.capacity() == 0);
}

TEST_CASE("tagged-field sections are bounded: count and size by the bytes left, reservations capped") {
  using namespace kproxy::codec;
  auto two_left = with_uvarint(3, 2);  // 3 tagged fields announced, 2 bytes left
  Reader r(two_left);
  CHECK(read_tag_count(r) == 0);
  CHECK_FALSE(r.ok());
  std::vector<uint8_t> field{0x01, 0x05, 'a', 'b', 'c', 'd'};  // tag 1, size 5, 4 bytes left
  Reader f(field);
  uint32_t tag = 0, size = 0;
  CHECK_FALSE(read_tag_header(f, tag, size));
  CHECK(f.error().find("tagged field 1 of 5 bytes exceeds the 4 bytes left") != std::string::npos);
  std::vector<uint8_t> fits{0x01, 0x04, 'a', 'b', 'c', 'd'};
  Reader g(fits);
  CHECK(read_tag_header(g, tag, size));
  CHECK(size == 4);
  CHECK(reserve_hint(INT32_MAX) == static_cast<size_t>(kMaxArrayReserve));
  CHECK(reserve_hint(3) == 3);
}
