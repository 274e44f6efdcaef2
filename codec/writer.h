// Writer: encoding of Kafka wire primitives, appended to a byte buffer.
//
// The same primitive set as Reader, plus the size helpers that generated `size()` methods use,
// so a message can compute its exact encoded length before writing (to patch a size prefix or
// reserve the buffer once).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "codec/reader.h"

namespace kproxy::codec {

/// Bytes of an unsigned LEB128 encoding of v.
constexpr size_t uvarint_size(uint32_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
constexpr uint32_t zigzag32(int32_t v) { return (static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31); }
constexpr uint64_t zigzag64(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
constexpr size_t varint_size(int32_t v) { return uvarint_size(zigzag32(v)); }
constexpr size_t varlong_size(int64_t v) {
  uint64_t u = zigzag64(v);
  size_t n = 1;
  while (u >= 0x80) {
    u >>= 7;
    ++n;
  }
  return n;
}
/// Bytes of a string/bytes length prefix: int16/int32 classic, uvarint(len+1) compact.
constexpr size_t string_prefix_size(size_t len, bool compact) { return compact ? uvarint_size(static_cast<uint32_t>(len + 1)) : 2; }
constexpr size_t bytes_prefix_size(size_t len, bool compact) { return compact ? uvarint_size(static_cast<uint32_t>(len + 1)) : 4; }
constexpr size_t array_prefix_size(size_t count, bool compact) { return compact ? uvarint_size(static_cast<uint32_t>(count + 1)) : 4; }
/// Prefix of a null string/bytes/array.
constexpr size_t null_prefix_size(bool compact, size_t classic_width) { return compact ? 1 : classic_width; }

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}

  std::vector<uint8_t>& buffer() { return out_; }
  size_t size() const { return out_.size(); }

  void int8(int8_t v) { out_.push_back(static_cast<uint8_t>(v)); }
  void int16(int16_t v) { fixed(static_cast<uint16_t>(v)); }
  void int32(int32_t v) { fixed(static_cast<uint32_t>(v)); }
  void int64(int64_t v) { fixed(static_cast<uint64_t>(v)); }
  void uint16(uint16_t v) { fixed(v); }
  void uint32(uint32_t v) { fixed(v); }
  void boolean(bool v) { out_.push_back(v ? 1 : 0); }
  void float64(double v) { fixed(std::bit_cast<uint64_t>(v)); }
  void uuid(const Uuid& u) { out_.insert(out_.end(), u.begin(), u.end()); }

  void uvarint(uint32_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<uint8_t>(v));
  }
  void varint(int32_t v) { uvarint(zigzag32(v)); }
  void varlong(int64_t v) {
    uint64_t u = zigzag64(v);
    while (u >= 0x80) {
      out_.push_back(static_cast<uint8_t>(u | 0x80));
      u >>= 7;
    }
    out_.push_back(static_cast<uint8_t>(u));
  }

  /// Appends big-endian integers as one block (int16/32/64 arrays; the count is written apart).
  template <typename T>
  void fixed_array(const std::vector<T>& items) {
    size_t at = out_.size();
    out_.resize(at + items.size() * sizeof(T));
    uint8_t* p = out_.data() + at;
    for (size_t i = 0; i < items.size(); ++i) {
      auto v = swap_wire_order(static_cast<std::make_unsigned_t<T>>(items[i]));
      std::memcpy(p + i * sizeof(T), &v, sizeof(T));
    }
  }

  void raw(Bytes b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void raw(std::string_view s) { out_.insert(out_.end(), s.begin(), s.end()); }

  void string(std::string_view s, bool compact) {
    if (compact) uvarint(static_cast<uint32_t>(s.size() + 1));
    else int16(static_cast<int16_t>(s.size()));
    raw(s);
  }
  void nullable_string(const std::optional<std::string_view>& s, bool compact) {
    if (!s) {
      if (compact) uvarint(0);
      else int16(-1);
      return;
    }
    string(*s, compact);
  }
  void bytes(Bytes b, bool compact) {
    if (compact) uvarint(static_cast<uint32_t>(b.size() + 1));
    else int32(static_cast<int32_t>(b.size()));
    raw(b);
  }
  void nullable_bytes(const std::optional<Bytes>& b, bool compact) {
    if (!b) {
      if (compact) uvarint(0);
      else int32(-1);
      return;
    }
    bytes(*b, compact);
  }
  /// count < 0 writes null.
  void array_length(int32_t count, bool compact) {
    if (compact) uvarint(static_cast<uint32_t>(count + 1));
    else int32(count);
  }

  /// Overwrites a big-endian int32 at `at` (used to patch a frame's size prefix).
  void patch_int32(size_t at, int32_t v) {
    auto u = static_cast<uint32_t>(v);
    out_[at] = static_cast<uint8_t>(u >> 24);
    out_[at + 1] = static_cast<uint8_t>(u >> 16);
    out_[at + 2] = static_cast<uint8_t>(u >> 8);
    out_[at + 3] = static_cast<uint8_t>(u);
  }

 private:
  template <typename T>
  void fixed(T v) {
    v = swap_wire_order(v);  // the wire is big-endian
    size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  std::vector<uint8_t>& out_;
};

}  // namespace kproxy::codec
