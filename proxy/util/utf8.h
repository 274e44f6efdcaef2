#pragma once

#include <cstddef>
#include <string_view>

namespace kproxy::util {

/// The length of UTF-8 text in Unicode code points: what JSON Schema's minLength and maxLength
/// count, and so what the admin API's documented limits mean (docs/admin-api.openapi.yaml).
inline size_t code_points(std::string_view text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;  // every byte but a continuation byte
  return n;
}

}  // namespace kproxy::util
