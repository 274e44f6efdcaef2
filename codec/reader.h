// Reader: bounds-checked decoding of Kafka wire primitives from one frame.
//
// A Reader keeps its *first* error and turns every later read into a no-op that returns a zero
// value, so a decoder is a straight list of reads followed by one `ok()` check. Every length or
// count read from the wire is bounded by the bytes that remain, so garbage can never make the
// decoder read out of bounds or allocate more than the frame could describe.
//
// Strings and byte fields come back as views into the frame: the frame must outlive the message.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kproxy::codec {

/// A read-only view of bytes on the wire.
using Bytes = std::span<const uint8_t>;

/// A 16-byte Kafka UUID (topic ids, directory ids), as on the wire.
using Uuid = std::array<uint8_t, 16>;

static_assert(std::endian::native == std::endian::little, "kproxy assumes a little-endian host");

/// Swaps between host order and the wire's big-endian order (C++20 has no std::byteswap yet).
template <typename T>
constexpr T swap_wire_order(T v) {
  if constexpr (sizeof(T) == 2) return static_cast<T>(__builtin_bswap16(v));
  else if constexpr (sizeof(T) == 4) return static_cast<T>(__builtin_bswap32(v));
  else if constexpr (sizeof(T) == 8) return static_cast<T>(__builtin_bswap64(v));
  else return v;
}

/// Caps on attacker-controlled sizes. Each is also bounded by the bytes left in the frame.
/// Longest string Kafka reads, classic or compact (its generated readers refuse longer ones).
inline constexpr int32_t kMaxStringLength = 0x7fff;
inline constexpr uint32_t kMaxTaggedFieldCount = 1u << 16;       // per struct
inline constexpr uint32_t kMaxTaggedFieldSize = 1u << 30;        // bytes of one tagged field

class Reader {
 public:
  explicit Reader(Bytes data) : data_(data) {}

  bool ok() const { return error_.empty(); }
  /// The first error, "" when none: "<message> v<N>: field <Name> at offset <K>: <reason>".
  const std::string& error() const { return error_; }
  size_t offset() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  bool at_end() const { return pos_ == data_.size(); }
  Bytes data() const { return data_; }

  /// Names the message being decoded, for error texts. Pointers must be string literals.
  void set_message(const char* name, int16_t version) { message_ = name; version_ = version; }
  /// Names the field about to be read, for error texts (a pointer store, cheap on the hot path).
  void set_field(const char* name) { field_ = name; }

  /// Records an error unless one is already recorded; later reads return zero values.
  void fail(std::string_view reason);

  int8_t int8() { return static_cast<int8_t>(fixed<uint8_t>()); }
  int16_t int16() { return static_cast<int16_t>(fixed<uint16_t>()); }
  int32_t int32() { return static_cast<int32_t>(fixed<uint32_t>()); }
  int64_t int64() { return static_cast<int64_t>(fixed<uint64_t>()); }
  uint16_t uint16() { return fixed<uint16_t>(); }
  uint32_t uint32() { return fixed<uint32_t>(); }
  bool boolean() { return fixed<uint8_t>() != 0; }
  double float64();
  Uuid uuid();

  /// Unsigned LEB128, at most 5 bytes.
  uint32_t uvarint();
  /// Zig-zag int32, at most 5 bytes.
  int32_t varint();
  /// Zig-zag int64, at most 10 bytes.
  int64_t varlong();

  /// Takes n raw bytes as a view; fails if fewer remain.
  Bytes raw(size_t n);
  void skip(size_t n) { (void)raw(n); }

  /// Replaces `out` with `count` big-endian integers read as one block (int16/32/64 arrays).
  template <typename T>
  void fixed_array(std::vector<T>& out, size_t count) {
    if (!ok()) return;
    if (count > remaining() / sizeof(T)) {
      fail("array of " + std::to_string(count) + " x " + std::to_string(sizeof(T)) + " bytes exceeds the " + std::to_string(remaining()) + " bytes left");
      return;
    }
    out.resize(count);
    const uint8_t* p = data_.data() + pos_;
    for (size_t i = 0; i < count; ++i) {
      std::make_unsigned_t<T> v;
      std::memcpy(&v, p + i * sizeof(T), sizeof(T));
      out[i] = static_cast<T>(swap_wire_order(v));
    }
    pos_ += count * sizeof(T);
  }

  /// Non-nullable string: int16 length (classic) or uvarint length+1 (compact).
  std::string_view string(bool compact);
  std::optional<std::string_view> nullable_string(bool compact);
  /// Non-nullable bytes: int32 length (classic) or uvarint length+1 (compact).
  Bytes bytes(bool compact);
  std::optional<Bytes> nullable_bytes(bool compact);
  /// Array element count: int32 (classic) or uvarint count+1 (compact); -1 means null.
  /// A count larger than the remaining bytes fails, as Java's readers do.
  int32_t array_length(bool compact);

 private:
  template <typename T>
  T fixed() {
    if (remaining() < sizeof(T)) [[unlikely]] {
      if (ok()) fail("need " + std::to_string(sizeof(T)) + " bytes, " + std::to_string(remaining()) + " left");
      return T{};
    }
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    v = swap_wire_order(v);  // the wire is big-endian
    return v;
  }
  std::optional<int64_t> length_prefix(bool compact, bool wide, bool nullable, const char* what);

  Bytes data_;
  size_t pos_ = 0;
  std::string error_;
  const char* message_ = "frame";
  const char* field_ = nullptr;
  int16_t version_ = -1;
};

}  // namespace kproxy::codec
