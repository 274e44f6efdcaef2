#include "codec/request_header.h"

#include "codec/generated/api_keys.h"

namespace kproxy::codec {

bool read_request_header(Bytes frame, RequestHeader& out, std::string* error) {
  out = RequestHeader{};
  Reader r(frame);
  r.set_message("RequestHeader", -1);
  r.set_field("RequestApiKey");
  out.api_key = r.int16();
  r.set_field("RequestApiVersion");
  out.api_version = r.int16();
  r.set_field("CorrelationId");
  out.correlation_id = r.int32();
  if (!r.ok()) {
    if (error) *error = r.error();
    return false;
  }
  out.header_version = request_header_version(out.api_key, out.api_version);
  if (out.header_version < 0) {
    // Unknown to kproxy: the broker decides. Take the client id if it parses as in v1.
    Reader probe(frame.subspan(kRequestHeaderFixedPart));
    auto client_id = probe.nullable_string(false);
    if (probe.ok()) out.client_id = client_id;
    out.size = kRequestHeaderFixedPart;
    return true;
  }
  if (out.header_version >= 1) {
    r.set_field("ClientId");
    out.client_id = r.nullable_string(false);
  }
  return finish_header(r, out.header_version >= 2, out.tagged_fields, out.size, error);
}

void write_request_header(Writer& w, const RequestHeader& h) {
  w.int16(h.api_key);
  w.int16(h.api_version);
  w.int32(h.correlation_id);
  if (h.header_version >= 1) w.nullable_string(h.client_id, false);
  if (h.header_version >= 2) write_unknown_tagged_fields(w, h.tagged_fields);
}

size_t request_header_size(const RequestHeader& h) {
  size_t n = kRequestHeaderFixedPart;
  if (h.header_version >= 1) n += h.client_id ? 2 + h.client_id->size() : 2;
  if (h.header_version >= 2) n += unknown_tagged_fields_size(h.tagged_fields);
  return n;
}

}  // namespace kproxy::codec
