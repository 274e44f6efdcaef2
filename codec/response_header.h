// ResponseHeader: the header in front of every Kafka response body.
//
//   v0: correlation_id int32
//   v1: + tagged fields
//
// A response does not name its API: the proxy knows it from the request it answers (the
// in-flight FIFO), and takes the header version from the generated table. ApiVersions
// responses always use v0, whatever the body version (KIP-511).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codec/message.h"
#include "codec/reader.h"
#include "codec/tagged_fields.h"
#include "codec/writer.h"

namespace kproxy::codec {

struct ResponseHeader {
  int32_t correlation_id = 0;
  UnknownTaggedFields tagged_fields;
  /// 0 or 1.
  int header_version = 0;
  /// Bytes the header takes (the body starts here).
  size_t size = 0;
};

/// Parses the header of `frame` (the bytes after the size prefix) at `header_version` (0 or 1).
bool read_response_header(Bytes frame, int header_version, ResponseHeader& out, std::string* error);

/// Writes `h` at `h.header_version`.
void write_response_header(Writer& w, const ResponseHeader& h);

/// Bytes `write_response_header` appends.
size_t response_header_size(const ResponseHeader& h);

/// A whole response frame: size prefix, response header (`header_version` 0 or 1) with
/// `correlation_id`, then `body` encoded at `version`.
std::vector<uint8_t> encode_response_frame(int32_t correlation_id, int header_version, const Message& body, int16_t version);

/// The correlation id of a response frame (after the size prefix); it is at offset 0 in every
/// header version. Requires at least 4 bytes.
inline int32_t peek_response_correlation_id(Bytes frame) {
  return static_cast<int32_t>((uint32_t{frame[0]} << 24) | (uint32_t{frame[1]} << 16) | (uint32_t{frame[2]} << 8) | uint32_t{frame[3]});
}

}  // namespace kproxy::codec
