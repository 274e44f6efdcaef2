// Tagged fields (KIP-482): the part of a flexible struct that old readers may skip.
//
// Known tags are decoded into named members by the generated code; every other tag is kept here
// byte for byte and written back in ascending tag order, interleaved with the known ones, so a
// decode → encode round trip never loses or reorders what a newer peer sent.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "codec/reader.h"
#include "codec/writer.h"

namespace kproxy::codec {

/// One tagged field kproxy does not know, kept as its raw bytes (a view into the frame).
struct UnknownTaggedField {
  uint32_t tag = 0;
  Bytes data;
  bool operator==(const UnknownTaggedField& o) const {
    return tag == o.tag && data.size() == o.data.size() && std::equal(data.begin(), data.end(), o.data.begin());
  }
};

/// The unknown tagged fields of one struct, in the order read (ascending tag on a valid frame).
using UnknownTaggedFields = std::vector<UnknownTaggedField>;

/// Encoded size of one tagged field: tag, size, then the payload.
constexpr size_t tagged_field_size(uint32_t tag, size_t payload) {
  return uvarint_size(tag) + uvarint_size(static_cast<uint32_t>(payload)) + payload;
}

}  // namespace kproxy::codec

namespace kproxy::codec {

/// Reads a tagged-field section keeping every field as unknown (used for headers, whose tags
/// kproxy never interprets). Tags must ascend, as Kafka writes them; each is bounded by its size.
inline void read_unknown_tagged_fields(Reader& r, UnknownTaggedFields& out) {
  uint32_t count = r.uvarint();
  if (count > kMaxTaggedFieldCount || count > r.remaining()) {
    r.fail("tagged field count " + std::to_string(count) + " is too large");
    return;
  }
  for (uint32_t i = 0; i < count && r.ok(); ++i) {
    uint32_t tag = r.uvarint();
    uint32_t size = r.uvarint();
    if (size > kMaxTaggedFieldSize) {
      r.fail("tagged field size " + std::to_string(size) + " is too large");
      return;
    }
    Bytes data = r.raw(size);
    if (r.ok()) out.push_back({tag, data});
  }
}

/// The end of a request or response header: its tagged-field section when the header version
/// has one, then the outcome. Sets `size` to the header's length; false (with `*error`) when
/// anything read did not parse.
inline bool finish_header(Reader& r, bool has_tagged_fields, UnknownTaggedFields& tagged, size_t& size, std::string* error) {
  if (has_tagged_fields) {
    r.set_field("_tagged_fields");
    read_unknown_tagged_fields(r, tagged);
  }
  if (!r.ok()) {
    if (error) *error = r.error();
    return false;
  }
  size = r.offset();
  return true;
}

/// Writes a tagged-field section made only of unknown fields, in the order given.
inline void write_unknown_tagged_fields(Writer& w, const UnknownTaggedFields& fields) {
  w.uvarint(static_cast<uint32_t>(fields.size()));
  for (const auto& f : fields) {
    w.uvarint(f.tag);
    w.uvarint(static_cast<uint32_t>(f.data.size()));
    w.raw(f.data);
  }
}

inline size_t unknown_tagged_fields_size(const UnknownTaggedFields& fields) {
  size_t n = uvarint_size(static_cast<uint32_t>(fields.size()));
  for (const auto& f : fields) n += tagged_field_size(f.tag, f.data.size());
  return n;
}

}  // namespace kproxy::codec
