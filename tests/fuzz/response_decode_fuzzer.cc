// Fuzz target: response header + body decode for any API key and version.
//
// Input: [key selector][version selector] then the response frame after its size prefix
// (correlation id, header tags when the header is v1, body). ApiVersions bodies also go through
// the v0 fallback decoder (codec/api_versions.h). Where a body decodes, the round-trip property of
// fuzz_common.h must hold, and visiting (and rewriting) every error code must keep it encodable.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "codec/api_versions.h"
#include "codec/generated/api_keys.h"
#include "codec/message.h"
#include "codec/response_header.h"
#include "tests/fuzz/api_selector.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  fuzz::ApiChoice api = fuzz::choose_api(data[0], data[1], /*request=*/false);
  if (!codec::response_versions(api.api_key).contains(api.version)) return 0;
  codec::Bytes frame(data + 2, size - 2);
  int header_version = codec::response_header_version(api.api_key, api.version);
  fuzz::check(header_version == 0 || header_version == 1, "response_header_version out of range");

  codec::ResponseHeader h;
  std::string error;
  if (!codec::read_response_header(frame, header_version, h, &error)) return 0;
  fuzz::check(h.size <= frame.size(), "response header: size beyond the frame");
  fuzz::check(h.correlation_id == codec::peek_response_correlation_id(frame), "response header: correlation id differs from peek");
  std::vector<uint8_t> hbytes;
  codec::Writer hw(hbytes);
  codec::write_response_header(hw, h);
  fuzz::check(hbytes.size() == codec::response_header_size(h), "response header: response_header_size() != bytes written");
  // Unknown header tags may use non-minimal varints, so compare the second encoding with the first.
  codec::ResponseHeader h2;
  fuzz::check(codec::read_response_header(codec::Bytes(hbytes.data(), hbytes.size()), header_version, h2, &error),
              "response header: own encoding does not parse: " + error);
  std::vector<uint8_t> hbytes2;
  codec::Writer hw2(hbytes2);
  codec::write_response_header(hw2, h2);
  fuzz::check(hbytes == hbytes2 && h2.size == hbytes.size() && h2.correlation_id == h.correlation_id,
              "response header: re-encoding differs: " + fuzz::hex(hbytes) + " vs " + fuzz::hex(hbytes2));

  codec::Bytes body = frame.subspan(h.size);
  auto msg = codec::make_response(api.api_key);
  if (!msg) return 0;
  codec::Reader r(body);
  msg->read(r, api.version);
  if (r.ok()) {
    fuzz::check_round_trip(*msg, api.version, [&] { return codec::make_response(api.api_key); });
    // Error injection rewrites codes in place; the message must stay encodable.
    msg->for_each_error_code(api.version, [](int16_t& code, const codec::ErrorScope&) { code = static_cast<int16_t>(code ^ 0x55); });
    fuzz::check_round_trip(*msg, api.version, [&] { return codec::make_response(api.api_key); });
  }
  if (api.api_key == static_cast<int16_t>(codec::ApiKey::kApiVersions)) {
    codec::ApiVersionsResponse av;
    int16_t at = codec::decode_api_versions_response(body, api.version, av, &error);
    fuzz::check(at == -1 || at == api.version || at == 0, "decode_api_versions_response returned version " + std::to_string(at));
    if (at >= 0) fuzz::check_round_trip(av, at, [] { return std::make_unique<codec::ApiVersionsResponse>(); });
  }
  return 0;
}
