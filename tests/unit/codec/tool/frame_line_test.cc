#include "codec/tool/frame_line.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using kproxy::codec::tool::decode_frame;
using kproxy::codec::tool::from_hex;
using kproxy::codec::tool::parse_frame_line;
using kproxy::codec::tool::roundtrip_frame;
using kproxy::codec::tool::to_hex;

namespace {

// Metadata v12 request: header v2 (correlation id 42, client id "cli"), null topics,
// AllowAutoTopicCreation true, IncludeTopicAuthorizedOperations false, no tags.
const std::string kMetadataRequest = "0003000c0000002a0003636c690000010000";

std::string roundtrip(const std::string& line) {
  std::string error;
  auto parsed = parse_frame_line(line, &error);
  REQUIRE_MESSAGE(parsed, error);
  std::vector<uint8_t> out;
  if (!roundtrip_frame(*parsed, out, &error)) return "error " + error;
  return to_hex(out);
}

}  // namespace

TEST_CASE("hex converts both ways and refuses odd lengths and non-hex characters") {
  std::vector<uint8_t> b;
  CHECK(from_hex("00aBff", b));
  CHECK(b == std::vector<uint8_t>{0x00, 0xab, 0xff});
  CHECK(to_hex(b) == "00abff");
  CHECK_FALSE(from_hex("abc", b));
  CHECK_FALSE(from_hex("zz", b));
}

TEST_CASE("a frame line names direction, api key and version before the hex") {
  std::string error;
  auto line = parse_frame_line("response 18 3 00000007", &error);
  REQUIRE(line);
  CHECK_FALSE(line->request);
  CHECK(line->api_key == 18);
  CHECK(line->version == 3);
  CHECK(line->frame.size() == 4);
  CHECK_FALSE(parse_frame_line("request 3", &error));
  CHECK(error == "bad version ''");
  CHECK_FALSE(parse_frame_line("upward 3 1 00", &error));
  CHECK_FALSE(parse_frame_line("request -1 1 00", &error));
  CHECK_FALSE(parse_frame_line("request 3 1 00 extra", &error));
}

TEST_CASE("decode prints the header and every body field by Kafka's name") {
  std::string error;
  auto line = parse_frame_line("request 3 12 " + kMetadataRequest, &error);
  REQUIRE(line);
  nlohmann::json j = decode_frame(*line);
  CHECK(j["api"] == "Metadata");
  CHECK(j["version"] == 12);
  CHECK(j["header"]["header_version"] == 2);
  CHECK(j["header"]["ClientId"] == "cli");
  CHECK(j["body"]["Topics"].is_null());
  CHECK(j["body"]["AllowAutoTopicCreation"] == true);
}

TEST_CASE("decode errors name message, field and the offset from the frame start") {
  std::string error;
  auto line = parse_frame_line("request 3 12 " + kMetadataRequest.substr(0, kMetadataRequest.size() - 4), &error);
  REQUIRE(line);
  nlohmann::json j = decode_frame(*line);
  REQUIRE(j.contains("error"));
  CHECK(j["error"].get<std::string>().rfind("MetadataRequest v12: field IncludeTopicAuthorizedOperations at offset 16: ", 0) == 0);
}

TEST_CASE("decode refuses trailing bytes and a header that contradicts the line") {
  std::string error;
  auto trailing = parse_frame_line("request 3 12 " + kMetadataRequest + "00", &error);
  REQUIRE(trailing);
  CHECK(decode_frame(*trailing)["error"].get<std::string>().find("1 bytes left after the body") != std::string::npos);
  auto other = parse_frame_line("request 3 11 " + kMetadataRequest, &error);
  REQUIRE(other);
  CHECK(decode_frame(*other)["error"].get<std::string>().find("the header says api key 3 v12") == 0);
}

TEST_CASE("roundtrip re-encodes header and body byte for byte, unknown tags included") {
  CHECK(roundtrip("request 3 12 " + kMetadataRequest) == kMetadataRequest);
  // ApiVersions v3 request: an unknown header tag 5, body tags 9 and 300 (2-byte varint).
  const std::string api_versions =
      "001200030000000100000105"
      "02abcd"
      "026b0231"
      "02090101ac0200";
  CHECK(roundtrip("request 18 3 " + api_versions) == api_versions);
}

TEST_CASE("an ApiVersions response in v0 format with UNSUPPORTED_VERSION decodes as v0") {
  const std::string v0 =
      "00000007"
      "0023"
      "00000001"
      "0012"
      "0000"
      "0003";
  std::string error;
  auto line = parse_frame_line("response 18 4 " + v0, &error);
  REQUIRE(line);
  nlohmann::json j = decode_frame(*line);
  CHECK(j["version"] == 0);
  CHECK(j["decoded_as_v0"] == true);
  CHECK(roundtrip("response 18 4 " + v0) == v0);
  // A body that decodes at neither version reports the error at the requested version.
  const std::string garbage =
      "00000007"
      "0023"
      "000000";
  CHECK(roundtrip("response 18 4 " + garbage).rfind("error ApiVersionsResponse v4: ", 0) == 0);
}
