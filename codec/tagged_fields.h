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
