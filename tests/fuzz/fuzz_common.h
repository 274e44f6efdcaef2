// Shared helpers of kproxy's libFuzzer targets (tests/fuzz/README.md).
//
// The decode targets check one property wherever a decode succeeds: encoding the decoded message
// gives exactly size() bytes, those bytes decode again (to the end, at the same version), and the
// second encoding is byte-for-byte the first. Any violation prints what differs and aborts, so
// libFuzzer records the input as a crash.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/message.h"
#include "codec/reader.h"
#include "codec/writer.h"

namespace kproxy::fuzz {

[[noreturn]] inline void violation(const std::string& what) {
  std::fprintf(stderr, "\n==== kproxy fuzz property violated: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void check(bool ok, const std::string& what) {
  if (!ok) violation(what);
}

inline std::string hex(const std::vector<uint8_t>& b, size_t max = 96) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < b.size() && i < max; ++i) {
    s += digits[b[i] >> 4];
    s += digits[b[i] & 15];
  }
  if (b.size() > max) s += "...";
  return s;
}

/// Encodes `m` at `version`, checking size() against the bytes written.
inline std::vector<uint8_t> encode(const codec::Message& m, int16_t version, const char* round) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  m.write(w, version);
  size_t predicted = m.size(version);
  if (predicted != out.size()) {
    violation(std::string(m.name()) + " v" + std::to_string(version) + " " + round + ": size() = " + std::to_string(predicted) +
              " but write() appended " + std::to_string(out.size()) + " bytes");
  }
  return out;
}

/// The round-trip property for a message `first` that decoded successfully at `version`.
/// `make` gives a fresh message of the same type.
template <class Make>
void check_round_trip(const codec::Message& first, int16_t version, Make&& make) {
  std::vector<uint8_t> bytes1 = encode(first, version, "first encoding");
  std::unique_ptr<codec::Message> second = make();
  codec::Reader r(codec::Bytes(bytes1.data(), bytes1.size()));
  second->read(r, version);
  std::string label = std::string(first.name()) + " v" + std::to_string(version);
  if (!r.ok()) violation(label + ": its own encoding does not decode: " + r.error() + " bytes " + hex(bytes1));
  if (!r.at_end()) {
    violation(label + ": decoding its own encoding leaves " + std::to_string(r.remaining()) + " bytes, bytes " + hex(bytes1));
  }
  std::vector<uint8_t> bytes2 = encode(*second, version, "second encoding");
  if (bytes1 != bytes2) violation(label + ": re-encoding differs\n  first  " + hex(bytes1, 400) + "\n  second " + hex(bytes2, 400));
  // The JSON view (what the tap and the admin API show) must agree too.
  nlohmann::json j1, j2;
  first.to_json(j1, version);
  second->to_json(j2, version);
  // Compared as text: NaN != NaN as json values, and invalid UTF-8 would make a strict dump throw.
  std::string t1 = j1.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string t2 = j2.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (t1 != t2) violation(label + ": to_json differs after a round trip\n  first  " + t1 + "\n  second " + t2);
}

/// Reads a byte from the front of [data, data+size), 0 when empty.
inline uint8_t take_byte(const uint8_t*& data, size_t& size) {
  if (size == 0) return 0;
  uint8_t b = *data;
  ++data;
  --size;
  return b;
}

}  // namespace kproxy::fuzz
