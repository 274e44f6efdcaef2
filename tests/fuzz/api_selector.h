// Maps the first two bytes of a fuzz input to an API key and a version the codec knows, so every
// input exercises a real decoder: byte 0 picks the key (index into all_api_keys, modulo), byte 1
// the version (offset from the lowest version of the range, modulo). The seed generator
// (seed_gen.cc) writes the inverse mapping.
#pragma once

#include <cstdint>
#include <span>

#include "codec/generated/api_keys.h"

namespace kproxy::fuzz {

struct ApiChoice {
  int16_t api_key = 0;
  int16_t version = 0;
};

inline ApiChoice choose_api(uint8_t key_byte, uint8_t version_byte, bool request) {
  std::span<const int16_t> keys = codec::all_api_keys();
  ApiChoice c;
  c.api_key = keys[key_byte % keys.size()];
  codec::VersionRange range = request ? codec::request_versions(c.api_key) : codec::response_versions(c.api_key);
  int span = range.max - range.min + 1;
  c.version = static_cast<int16_t>(range.min + (span > 0 ? version_byte % span : 0));
  return c;
}

/// The two selector bytes that choose_api maps to (api_key, version); false if the key is unknown.
inline bool selector_bytes(int16_t api_key, int16_t version, bool request, uint8_t out[2]) {
  std::span<const int16_t> keys = codec::all_api_keys();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] != api_key) continue;
    codec::VersionRange range = request ? codec::request_versions(api_key) : codec::response_versions(api_key);
    out[0] = static_cast<uint8_t>(i);
    out[1] = static_cast<uint8_t>(version - range.min);
    return true;
  }
  return false;
}

}  // namespace kproxy::fuzz
