#include "codec/tool/frame_line.h"

#include <charconv>
#include <memory>

#include "codec/api_versions.h"
#include "codec/generated/api_keys.h"
#include "codec/message.h"
#include "codec/message_support.h"
#include "codec/request_header.h"
#include "codec/response_header.h"

namespace kproxy::codec::tool {
namespace {

std::string_view next_word(std::string_view& rest) {
  size_t b = rest.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(b);
  size_t e = rest.find_first_of(" \t\r\n");
  std::string_view word = rest.substr(0, e);
  rest.remove_prefix(e == std::string_view::npos ? rest.size() : e);
  return word;
}

bool parse_int16(std::string_view s, int16_t& out) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < INT16_MIN || v > INT16_MAX) return false;
  out = static_cast<int16_t>(v);
  return true;
}

nlohmann::json unknown_tags_json(const UnknownTaggedFields& tags) {
  nlohmann::json arr = nlohmann::json::array();
  // Base64, like every bytes value in the generated bodies' JSON.
  for (const auto& t : tags) arr.push_back({{"tag", t.tag}, {"data", json_bytes(t.data)}});
  return arr;
}

// A frame decoded into its header and body.
struct DecodedFrame {
  RequestHeader request_header;
  ResponseHeader response_header;
  std::unique_ptr<Message> body;
  int16_t body_version = 0;  // the version the body was decoded at (0 after the ApiVersions fallback)
  bool api_versions_fallback = false;
};

// Reads a body that starts at `offset` of `frame` and must end exactly at the frame's end.
// Offsets in errors count from the frame start, so they point into the line's hex.
bool read_body(Bytes frame, size_t offset, Message& body, int16_t version, std::string* error) {
  Reader r(frame);
  r.skip(offset);
  r.set_message(body.name(), version);
  body.read(r, version);
  if (r.ok() && !r.at_end()) {
    r.set_field(nullptr);
    r.fail(std::to_string(r.remaining()) + " bytes left after the body");
  }
  if (!r.ok()) {
    *error = r.error();
    return false;
  }
  return true;
}

bool decode(const FrameLine& line, DecodedFrame& out, std::string* error) {
  Bytes frame(line.frame.data(), line.frame.size());
  const char* api = api_name(line.api_key);
  if (api == nullptr) {
    *error = "unknown api key " + std::to_string(line.api_key);
    return false;
  }
  size_t body_offset = 0;
  if (line.request) {
    if (!read_request_header(frame, out.request_header, error)) return false;
    const RequestHeader& h = out.request_header;
    if (h.api_key != line.api_key || h.api_version != line.version) {
      *error = "the header says api key " + std::to_string(h.api_key) + " v" + std::to_string(h.api_version) + ", the line says " +
               std::to_string(line.api_key) + " v" + std::to_string(line.version);
      return false;
    }
    if (h.header_version < 0) {
      *error = std::string(api) + " v" + std::to_string(line.version) + " is not a version kproxy knows";
      return false;
    }
    body_offset = h.size;
    out.body = make_request(line.api_key);
  } else {
    int hv = response_header_version(line.api_key, line.version);
    if (hv < 0) {
      *error = std::string(api) + " v" + std::to_string(line.version) + " is not a version kproxy knows";
      return false;
    }
    if (!read_response_header(frame, hv, out.response_header, error)) return false;
    body_offset = out.response_header.size;
    out.body = make_response(line.api_key);
  }
  if (!out.body) {
    *error = "no message for api key " + std::to_string(line.api_key);
    return false;
  }
  out.body_version = line.version;
  if (read_body(frame, body_offset, *out.body, line.version, error)) return true;

  // docs/protocol.md "The v0 fallback": a broker that does not support the requested ApiVersions version answers
  // with a v0 body (UNSUPPORTED_VERSION). Decode it as the proxy does (codec/api_versions.h, the
  // same rule as Java's ApiVersionsResponse.parse); the error above stays the one reported.
  if (!line.request && line.api_key == static_cast<int16_t>(codec::ApiKey::kApiVersions) && line.version != 0) {
    auto v0 = std::make_unique<ApiVersionsResponse>();
    if (decode_api_versions_response(frame.subspan(body_offset), line.version, *v0) == 0) {
      out.body = std::move(v0);
      out.body_version = 0;
      out.api_versions_fallback = true;
      error->clear();
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<FrameLine> parse_frame_line(std::string_view line, std::string* error) {
  std::string_view rest = line;
  std::string_view dir = next_word(rest);
  std::string_view key = next_word(rest);
  std::string_view version = next_word(rest);
  std::string_view hex = next_word(rest);
  FrameLine out;
  if (dir == "request") {
    out.request = true;
  } else if (dir == "response") {
    out.request = false;
  } else {
    *error = "expected 'request' or 'response', got '" + std::string(dir.substr(0, 32)) + "'";
    return std::nullopt;
  }
  if (!parse_int16(key, out.api_key) || out.api_key < 0) {
    *error = "bad api key '" + std::string(key.substr(0, 32)) + "'";
    return std::nullopt;
  }
  if (!parse_int16(version, out.version) || out.version < 0) {
    *error = "bad version '" + std::string(version.substr(0, 32)) + "'";
    return std::nullopt;
  }
  if (hex.empty()) {
    *error = "missing the frame's hex";
    return std::nullopt;
  }
  if (!next_word(rest).empty()) {
    *error = "unexpected text after the frame's hex";
    return std::nullopt;
  }
  if (!from_hex(hex, out.frame)) {
    *error = "the frame is not valid hex (odd length or a non-hex character)";
    return std::nullopt;
  }
  return out;
}

bool from_hex(std::string_view hex, std::vector<uint8_t>& out) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return false;
  out.resize(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

nlohmann::json decode_frame(const FrameLine& line) {
  DecodedFrame d;
  std::string error;
  if (!decode(line, d, &error)) return {{"error", error}};
  nlohmann::json out;
  out["api"] = api_name(line.api_key);
  out["api_key"] = line.api_key;
  out["direction"] = line.request ? "request" : "response";
  out["version"] = d.body_version;
  if (d.api_versions_fallback) out["decoded_as_v0"] = true;
  nlohmann::json header;
  if (line.request) {
    const RequestHeader& h = d.request_header;
    header["header_version"] = h.header_version;
    header["RequestApiKey"] = h.api_key;
    header["RequestApiVersion"] = h.api_version;
    header["CorrelationId"] = h.correlation_id;
    if (h.header_version >= 1) header["ClientId"] = h.client_id ? nlohmann::json(std::string(*h.client_id)) : nlohmann::json(nullptr);
    if (!h.tagged_fields.empty()) header["_unknown_tagged_fields"] = unknown_tags_json(h.tagged_fields);
  } else {
    const ResponseHeader& h = d.response_header;
    header["header_version"] = h.header_version;
    header["CorrelationId"] = h.correlation_id;
    if (!h.tagged_fields.empty()) header["_unknown_tagged_fields"] = unknown_tags_json(h.tagged_fields);
  }
  out["header"] = std::move(header);
  nlohmann::json body = nlohmann::json::object();
  d.body->to_json(body, d.body_version);
  out["body"] = std::move(body);
  return out;
}

bool roundtrip_frame(const FrameLine& line, std::vector<uint8_t>& out, std::string* error) {
  DecodedFrame d;
  if (!decode(line, d, error)) return false;
  out.clear();
  Writer w(out);
  size_t header_size;
  if (line.request) {
    header_size = request_header_size(d.request_header);
    write_request_header(w, d.request_header);
  } else {
    header_size = response_header_size(d.response_header);
    write_response_header(w, d.response_header);
  }
  if (w.size() != header_size) {
    *error = "header size() says " + std::to_string(header_size) + " bytes, write() appended " + std::to_string(w.size());
    return false;
  }
  size_t body_size = d.body->size(d.body_version);
  d.body->write(w, d.body_version);
  if (w.size() - header_size != body_size) {
    *error = std::string(d.body->name()) + " v" + std::to_string(d.body_version) + ": size() says " + std::to_string(body_size) +
             " bytes, write() appended " + std::to_string(w.size() - header_size);
    return false;
  }
  return true;
}

}  // namespace kproxy::codec::tool
