#include "codec/writer.h"

#include <doctest/doctest.h>

#include <vector>

using namespace kproxy::codec;

TEST_CASE("Writer encodes what Reader decodes, and the size helpers match") {
  std::vector<uint8_t> out;
  Writer w(out);
  w.int16(-2);
  w.uvarint(300);
  w.varint(-1);
  w.varlong(INT64_MIN);
  w.string("ab", true);
  w.nullable_string(std::nullopt, false);
  w.bytes(Bytes{}, false);
  w.array_length(-1, true);
  w.float64(1.5);
  CHECK(out.size() == 2 + uvarint_size(300) + varint_size(-1) + varlong_size(INT64_MIN) + string_prefix_size(2, true) + 2 +
                          null_prefix_size(false, 2) + bytes_prefix_size(0, false) + 1 + 8);
  Reader r(out);
  CHECK(r.int16() == -2);
  CHECK(r.uvarint() == 300);
  CHECK(r.varint() == -1);
  CHECK(r.varlong() == INT64_MIN);
  CHECK(r.string(true) == "ab");
  CHECK_FALSE(r.nullable_string(false).has_value());
  CHECK(r.bytes(false).empty());
  CHECK(r.array_length(true) == -1);
  CHECK(r.float64() == 1.5);
  CHECK(r.ok());
  CHECK(r.at_end());
}

TEST_CASE("Writer patches a size prefix") {
  std::vector<uint8_t> out;
  Writer w(out);
  w.int32(0);
  w.int8(1);
  w.patch_int32(0, 0x01020304);
  CHECK(out == std::vector<uint8_t>{1, 2, 3, 4, 1});
}

TEST_CASE("Size helpers count varint bytes") {
  CHECK(uvarint_size(0) == 1);
  CHECK(uvarint_size(127) == 1);
  CHECK(uvarint_size(128) == 2);
  CHECK(uvarint_size(UINT32_MAX) == 5);
  CHECK(varint_size(-1) == 1);
  CHECK(varlong_size(INT64_MAX) == 10);
  CHECK(string_prefix_size(5, false) == 2);
  CHECK(array_prefix_size(127, true) == 2);
}
