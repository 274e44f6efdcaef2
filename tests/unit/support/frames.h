// Kafka frames for unit tests, built with the codec: a whole request frame of a generated
// message, with the header fields kproxy's own parser would have filled.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "codec/generated/api_keys.h"
#include "codec/request_header.h"
#include "codec/response_header.h"
#include "codec/writer.h"

namespace kproxy::testing {

/// A whole request frame (size prefix, request header v1 or v2 as Kafka's tables give it for
/// `version`, then `body` encoded at `version`); `header` gets what a parse of it would give.
/// `client_id` must outlive `header` (it is a view).
template <class M>
std::vector<uint8_t> encoded_request_frame(const M& body, int16_t version, int32_t correlation_id, std::string_view client_id,
                                           codec::RequestHeader& header) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  w.int32(0);
  w.int16(M::kApiKey);
  w.int16(version);
  w.int32(correlation_id);
  w.nullable_string(client_id, false);
  header.header_version = codec::request_header_version(M::kApiKey, version);
  if (header.header_version >= 2) w.uvarint(0);  // no tagged fields
  header.size = out.size() - 4;
  body.write(w, version);
  w.patch_int32(0, static_cast<int32_t>(out.size() - 4));
  header.api_key = M::kApiKey;
  header.api_version = version;
  header.correlation_id = correlation_id;
  header.client_id = client_id;
  return out;
}

/// A whole response frame: size prefix, response header (v0 or v1 as Kafka's tables give it for
/// `version`) with `correlation_id`, then `body` encoded at `version`.
template <class M>
std::vector<uint8_t> encoded_response_frame(const M& body, int16_t version, int32_t correlation_id = 9) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  w.int32(0);
  codec::ResponseHeader h;
  h.correlation_id = correlation_id;
  h.header_version = codec::response_header_version(M::kApiKey, version);
  codec::write_response_header(w, h);
  body.write(w, version);
  w.patch_int32(0, static_cast<int32_t>(out.size() - 4));
  return out;
}

}  // namespace kproxy::testing
