#include "codec/message_support.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace kproxy::codec;

TEST_CASE("base64 renders bytes and uuids as Kafka's JSON does") {
  const std::string s = "foobar";
  Bytes b(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  CHECK(json_bytes(b.first(0)) == "");
  CHECK(json_bytes(b.first(1)) == "Zg==");
  CHECK(json_bytes(b.first(2)) == "Zm8=");
  CHECK(json_bytes(b) == "Zm9vYmFy");
  Uuid u{};
  u.fill(0xff);
  CHECK(json_uuid(u) == "_____________________w");
}

TEST_CASE("Unknown tags below a limit are written in order and the rest after") {
  const uint8_t payload[1] = {7};
  UnknownTaggedFields u{{1, {}}, {5, Bytes(payload, 1)}};
  std::vector<uint8_t> out;
  Writer w(out);
  size_t next = write_unknown_tags_below(w, u, 0, 3);
  CHECK(next == 1);
  CHECK(out == std::vector<uint8_t>{1, 0});
  write_unknown_tags_from(w, u, next);
  CHECK(out == std::vector<uint8_t>{1, 0, 5, 1, 7});
}

TEST_CASE("Tag headers are bounded by the bytes left") {
  std::vector<uint8_t> in{0x03, 0x09, 0x00};
  Reader r(in);
  uint32_t tag = 0, size = 0;
  CHECK_FALSE(read_tag_header(r, tag, size));
  CHECK(r.error().find("tagged field 3 of 9 bytes exceeds the 1 bytes left") != std::string::npos);
}
