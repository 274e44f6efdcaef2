// Helpers shared by the generated message code (codec/gen/generate.py): tagged-field sections,
// array reservation and JSON conversions. Not meant for use outside generated code and tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "codec/reader.h"
#include "codec/tagged_fields.h"
#include "codec/writer.h"

namespace kproxy::codec {

/// Elements reserved up front for an array of `count`: the count is attacker-controlled (bounded
/// only by the bytes left), so reserve at most this many and let the vector grow as elements decode.
inline constexpr int32_t kMaxArrayReserve = 256;
inline size_t reserve_hint(int32_t count) { return static_cast<size_t>(std::min(count, kMaxArrayReserve)); }

/// Reads the uvarint count that opens a tagged-field section, bounded like every other count.
inline uint32_t read_tag_count(Reader& r) {
  const uint32_t count = r.uvarint();
  if (r.ok() && (count > kMaxTaggedFieldCount || count > r.remaining())) {
    r.fail("tagged field count " + std::to_string(count) + " exceeds the " + std::to_string(r.remaining()) + " bytes left");
    return 0;
  }
  return count;
}

/// Reads one tagged field's tag and size; false (with the reader failed) if the size runs past the end.
inline bool read_tag_header(Reader& r, uint32_t& tag, uint32_t& size) {
  tag = r.uvarint();
  size = r.uvarint();
  if (!r.ok()) return false;
  if (size > kMaxTaggedFieldSize || size > r.remaining()) {
    r.fail("tagged field " + std::to_string(tag) + " of " + std::to_string(size) + " bytes exceeds the " + std::to_string(r.remaining()) +
           " bytes left");
    return false;
  }
  return true;
}

/// A known tagged field must decode to exactly its declared size (otherwise re-encoding would
/// change the bytes, and the frame is malformed anyway).
inline void check_tag_end(Reader& r, size_t end) {
  if (r.ok() && r.offset() != end) {
    r.fail("tagged field decoded to " + std::to_string(r.offset()) + " but its size ends at " + std::to_string(end));
  }
}

inline void write_unknown_tag(Writer& w, const UnknownTaggedField& u) {
  w.uvarint(u.tag);
  w.uvarint(static_cast<uint32_t>(u.data.size()));
  w.raw(u.data);
}

/// Writes unknown fields from index `from` while their tag is below `limit` (the list is in
/// ascending tag order on a valid frame); returns the index of the first one not written.
inline size_t write_unknown_tags_below(Writer& w, const UnknownTaggedFields& unknown, size_t from, uint32_t limit) {
  while (from < unknown.size() && unknown[from].tag < limit) write_unknown_tag(w, unknown[from++]);
  return from;
}

inline void write_unknown_tags_from(Writer& w, const UnknownTaggedFields& unknown, size_t from) {
  while (from < unknown.size()) write_unknown_tag(w, unknown[from++]);
}

/// Base64 (RFC 4648) with or without padding, standard or URL alphabet.
inline std::string base64(Bytes b, bool url, bool pad) {
  const char* alphabet = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                             : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((b.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= b.size(); i += 3) {
    uint32_t v = (uint32_t{b[i]} << 16) | (uint32_t{b[i + 1]} << 8) | b[i + 2];
    for (int s = 18; s >= 0; s -= 6) out.push_back(alphabet[(v >> s) & 0x3f]);
  }
  if (i < b.size()) {
    uint32_t v = uint32_t{b[i]} << 16;
    if (i + 1 < b.size()) v |= uint32_t{b[i + 1]} << 8;
    const int chars = i + 1 < b.size() ? 3 : 2;
    for (int k = 0; k < chars; ++k) out.push_back(alphabet[(v >> (18 - 6 * k)) & 0x3f]);
    if (pad) out.append(static_cast<size_t>(4 - chars), '=');
  }
  return out;
}

/// bytes fields in JSON: standard base64 with padding (what Kafka's generated JSON converters write).
inline std::string json_bytes(Bytes b) { return base64(b, false, true); }
/// uuid fields in JSON: Kafka's Uuid.toString(), URL-safe base64 without padding (22 chars).
inline std::string json_uuid(const Uuid& u) { return base64(Bytes(u.data(), u.size()), true, false); }
/// records fields in JSON: {"bytes": N}, or null.
inline nlohmann::json json_records(const std::optional<Bytes>& r) {
  if (!r) return nullptr;
  return nlohmann::json{{"bytes", r->size()}};
}
inline nlohmann::json json_unknown_tags(const UnknownTaggedFields& unknown) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& u : unknown) out.push_back({{"tag", u.tag}, {"data", json_bytes(u.data)}});
  return out;
}

}  // namespace kproxy::codec
