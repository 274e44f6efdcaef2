// FrameLine: one Kafka frame as kproxy-codec reads it from a text line, and what the tool does
// with it (decode to JSON, re-encode).
//
// Line format (one frame per line, fields separated by blanks):
//
//   request|response <api_key> <version> <hex of the frame after its size prefix>
//
// The hex covers the header and the body. A response names its API and version on the line
// because the wire does not (the proxy learns them from the request it answers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/hex.h"

namespace kproxy::codec::tool {

struct FrameLine {
  bool request = true;
  int16_t api_key = 0;
  int16_t version = 0;
  std::vector<uint8_t> frame;  // header + body, no size prefix
};

/// Parses one input line. Returns nullopt and sets `error` when the line is malformed.
std::optional<FrameLine> parse_frame_line(std::string_view line, std::string* error);

/// Lower-case hex of `bytes`.
using codec::to_hex;
inline std::string to_hex(const std::vector<uint8_t>& b) { return to_hex(b.data(), b.size()); }

/// Parses hex (either case, even length). Returns false on anything else.
bool from_hex(std::string_view hex, std::vector<uint8_t>& out);

/// Decodes header and body: {"api", "api_key", "version", "header": {...}, "body": {...}},
/// or {"error": "..."} naming message, field and offset (offsets count from the frame start).
nlohmann::json decode_frame(const FrameLine& line);

/// Decodes, then encodes header and body again at the same version. Returns true and the new
/// frame bytes in `out`, or false and the reason in `error`.
bool roundtrip_frame(const FrameLine& line, std::vector<uint8_t>& out, std::string* error);

}  // namespace kproxy::codec::tool
