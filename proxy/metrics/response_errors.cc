#include "proxy/metrics/response_errors.h"

namespace kproxy::metrics {
namespace {

void skip_tagged_fields(codec::Reader& r) {
  uint32_t n = r.uvarint();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    r.uvarint();
    r.skip(r.uvarint());
  }
}

}  // namespace

bool response_body(codec::Bytes frame, int header_version, codec::Bytes& body) {
  if (frame.size() < 8 || header_version < 0) return false;
  codec::Reader r(frame.subspan(8));
  if (header_version >= 1) skip_tagged_fields(r);
  if (!r.ok()) return false;
  body = frame.subspan(8 + r.offset());
  return true;
}

bool scan_produce_response_errors(codec::Bytes body, int16_t version, ScannedErrors& out) {
  if (version < 3 || version > 13) return false;
  const bool flex = version >= 9;
  out.count = 0;
  codec::Reader r(body);
  int32_t topics = r.array_length(flex);
  for (int32_t t = 0; t < topics && r.ok(); ++t) {
    if (version <= 12) r.string(flex);
    else r.uuid();
    int32_t partitions = r.array_length(flex);
    for (int32_t p = 0; p < partitions && r.ok(); ++p) {
      r.int32();  // index
      int16_t code = r.int16();
      if (code != 0) {
        if (out.count == kMaxScannedErrors) return false;
        out.codes[out.count++] = code;
      }
      r.int64();                   // base offset
      r.int64();                   // log append time
      if (version >= 5) r.int64();  // log start offset
      if (version >= 8) {
        int32_t record_errors = r.array_length(flex);
        for (int32_t e = 0; e < record_errors && r.ok(); ++e) {
          r.int32();
          r.nullable_string(flex);
          if (flex) skip_tagged_fields(r);
        }
        r.nullable_string(flex);  // error message
      }
      if (flex) skip_tagged_fields(r);  // current leader (no error code in it)
    }
    if (flex) skip_tagged_fields(r);
  }
  r.int32();  // throttle time
  if (flex) skip_tagged_fields(r);
  return r.ok() && r.at_end();
}

}  // namespace kproxy::metrics
