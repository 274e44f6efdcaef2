#include "codec/reader.h"

#include <doctest/doctest.h>

#include <vector>

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
