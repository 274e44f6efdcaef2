// RequestHeader: the header in front of every Kafka request body.
//
//   v0: api_key int16, api_version int16, correlation_id int32
//   v1: + client_id (nullable string, int16 length)
//   v2: + tagged fields. client_id stays a classic int16-length string (docs/protocol.md "Request and response headers").
//
// The header version follows from the API's flexible versions (generated table, see
// codec/generated/api_keys.h). The api key, version and correlation id sit at fixed offsets in every
// version, so even a request for an API kproxy does not know can be matched to its response.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "codec/reader.h"
#include "codec/tagged_fields.h"
#include "codec/writer.h"

namespace kproxy::codec {

/// Bytes from the start of a request (after the size prefix) to the end of the correlation id.
inline constexpr size_t kRequestHeaderFixedPart = 8;

struct RequestHeader {
  int16_t api_key = 0;
  int16_t api_version = 0;
  int32_t correlation_id = 0;
  std::optional<std::string_view> client_id;
  UnknownTaggedFields tagged_fields;
  /// 0, 1 or 2; -1 when the api key or version is unknown (client id parsed as in v1 if it fits).
  int header_version = -1;
  /// Bytes the header takes (the body starts here).
  size_t size = 0;
};

/// Parses the header at the start of `frame` (the bytes after the size prefix). Returns false
/// only when even the fixed part does not parse, or a known header version is malformed.
bool read_request_header(Bytes frame, RequestHeader& out, std::string* error);

/// Writes `h` at `h.header_version` (which must be 0, 1 or 2).
void write_request_header(Writer& w, const RequestHeader& h);

/// Bytes `write_request_header` appends.
size_t request_header_size(const RequestHeader& h);

}  // namespace kproxy::codec
