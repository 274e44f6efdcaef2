#include "codec/api_versions.h"

#include <doctest/doctest.h>

#include <vector>

#include "codec/generated/error_code.h"
#include "codec/writer.h"

using namespace kproxy::codec;

TEST_CASE("An UNSUPPORTED_VERSION ApiVersions response in v0 format decodes although v3 was requested") {
  // ErrorCode 35, ApiKeys [ {18, 0, 3} ] as a classic (v0) body: what a broker sends when it does
  // not support the requested ApiVersions version.
  const std::vector<uint8_t> body{0x00, 0x23, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x00, 0x00, 0x00, 0x03};
  ApiVersionsResponse resp;
  REQUIRE(decode_api_versions_response(body, 3, resp) == 0);
  CHECK(resp.error_code == static_cast<int16_t>(ErrorCode::kUnsupportedVersion));
  REQUIRE(resp.api_keys.size() == 1);
  CHECK(resp.api_keys[0].api_key == 18);
  CHECK(resp.api_keys[0].min_version == 0);
  CHECK(resp.api_keys[0].max_version == 3);
}

TEST_CASE("An ApiVersions response at the requested version decodes at that version") {
  ApiVersionsResponse sent;
  sent.api_keys.push_back({});
  sent.api_keys[0].api_key = 3;
  sent.api_keys[0].max_version = 13;
  sent.finalized_features_epoch = 7;
  std::vector<uint8_t> body;
  Writer w(body);
  sent.write(w, 4);
  ApiVersionsResponse resp;
  REQUIRE(decode_api_versions_response(body, 4, resp) == 4);
  CHECK(resp.api_keys[0].max_version == 13);
  CHECK(resp.finalized_features_epoch == 7);
}

TEST_CASE("An ApiVersions response that decodes at neither version reports the first error") {
  const std::vector<uint8_t> body{0x00, 0x00, 0x7f};
  ApiVersionsResponse resp;
  std::string error;
  CHECK(decode_api_versions_response(body, 3, resp, &error) == -1);
  CHECK(error.find("ApiVersionsResponse v3") == 0);
}
