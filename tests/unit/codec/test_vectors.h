// Loads the hex test vectors under tests/vectors/ ('#' starts a comment, whitespace is ignored).
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "codec/generated/messages.h"
#include "codec/message.h"
#include "codec/writer.h"

namespace kproxy::codec::test {

inline std::vector<uint8_t> load_vector(const std::string& name) {
  std::ifstream in(std::string(KPROXY_SOURCE_DIR) + "/tests/vectors/" + name);
  if (!in) throw std::runtime_error("cannot open tests/vectors/" + name);
  std::string line, hex;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    for (char c : line) {
      if (!std::isspace(static_cast<unsigned char>(c))) hex.push_back(c);
    }
  }
  if (hex.size() % 2 != 0) throw std::runtime_error("odd number of hex digits in " + name);
  std::vector<uint8_t> out;
  for (size_t i = 0; i < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

/// Encodes a whole frame: size prefix, header (already filled at its version), body.
template <typename Header>
std::vector<uint8_t> encode_frame(const Header& header, int16_t header_version, const Message& body, int16_t version) {
  std::vector<uint8_t> out;
  Writer w(out);
  w.int32(0);
  header.write(w, header_version);
  body.write(w, version);
  w.patch_int32(0, static_cast<int32_t>(out.size() - 4));
  return out;
}

inline std::string hex(const std::vector<uint8_t>& b) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s.push_back(digits[c >> 4]);
    s.push_back(digits[c & 15]);
  }
  return s;
}

}  // namespace kproxy::codec::test
