#include "codec/response_header.h"

namespace kproxy::codec {

bool read_response_header(Bytes frame, int header_version, ResponseHeader& out, std::string* error) {
  out = ResponseHeader{};
  out.header_version = header_version;
  Reader r(frame);
  r.set_message("ResponseHeader", static_cast<int16_t>(header_version));
  r.set_field("CorrelationId");
  out.correlation_id = r.int32();
  return finish_header(r, header_version >= 1, out.tagged_fields, out.size, error);
}

void write_response_header(Writer& w, const ResponseHeader& h) {
  w.int32(h.correlation_id);
  if (h.header_version >= 1) write_unknown_tagged_fields(w, h.tagged_fields);
}

size_t response_header_size(const ResponseHeader& h) {
  return 4 + (h.header_version >= 1 ? unknown_tagged_fields_size(h.tagged_fields) : 0);
}

std::vector<uint8_t> encode_response_frame(int32_t correlation_id, int header_version, const Message& body, int16_t version) {
  ResponseHeader h;
  h.correlation_id = correlation_id;
  h.header_version = header_version;
  size_t total = response_header_size(h) + body.size(version);
  std::vector<uint8_t> out;
  out.reserve(4 + total);
  Writer w(out);
  w.int32(static_cast<int32_t>(total));
  write_response_header(w, h);
  body.write(w, version);
  return out;
}

}  // namespace kproxy::codec
