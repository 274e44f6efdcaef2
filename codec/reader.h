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
inline constexpr uint32_t kMaxTaggedFieldCount = 1u << 16;  // per struct
inline constexpr uint32_t kMaxTaggedFieldSize = 1u << 30;   // bytes of one tagged field

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
  void set_message(const char* name, int16_t version) {
    message_ = name;
    version_ = version;
  }
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
  uint32_t uvarint() {
    // Most varints on the wire (lengths, counts, tags) fit in one byte.
    if (pos_ < data_.size() && ok()) [[likely]] {
      uint8_t b = data_[pos_];
      if ((b & 0x80) == 0) {
        ++pos_;
        return b;
      }
    }
    return uvarint_slow();
  }
  /// Zig-zag int32, at most 5 bytes.
  int32_t varint();
  /// Zig-zag int64, at most 10 bytes.
  int64_t varlong();

  /// Takes n raw bytes as a view; fails if fewer remain.
  Bytes raw(size_t n) {
    if (n > remaining() || !ok()) [[unlikely]]
      return raw_slow(n);
    Bytes out = data_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  void skip(size_t n) { (void)raw(n); }

  /// Replaces `out` with `count` big-endian integers read as one block (int16/32/64 arrays).
  template <typename T>
  void fixed_array(std::vector<T>& out, size_t count) {
    if (!ok()) return;
    if (count > remaining() / sizeof(T)) {
      fail("array of " + std::to_string(count) + " x " + std::to_string(sizeof(T)) + " bytes exceeds the " + std::to_string(remaining()) +
           " bytes left");
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
  std::string_view string(bool compact) {
    auto len = length_prefix(compact, false, false, "string");
    if (!len) return {};
    if (*len > kMaxStringLength) [[unlikely]] {
      fail_string_length(*len);
      return {};
    }
    Bytes b = raw(static_cast<size_t>(*len));
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  std::optional<std::string_view> nullable_string(bool compact) {
    if (!ok()) return std::nullopt;
    auto len = length_prefix(compact, false, true, "string");
    if (!len) return std::nullopt;
    if (*len > kMaxStringLength) [[unlikely]] {
      fail_string_length(*len);
      return std::nullopt;
    }
    Bytes b = raw(static_cast<size_t>(*len));
    return std::string_view{reinterpret_cast<const char*>(b.data()), b.size()};
  }
  /// Non-nullable bytes: int32 length (classic) or uvarint length+1 (compact).
  Bytes bytes(bool compact);
  std::optional<Bytes> nullable_bytes(bool compact);
  /// Array element count: int32 (classic) or uvarint count+1 (compact); -1 means null.
  /// A count larger than the remaining bytes fails, as Java's readers do.
  int32_t array_length(bool compact) {
    if (!ok()) return 0;
    // Kafka's readers take any negative count as null (see length_prefix).
    int32_t n = compact ? static_cast<int32_t>(uvarint() - 1u) : int32();
    if (!ok()) return 0;
    if (n < 0) return -1;
    if (static_cast<size_t>(n) > remaining()) [[unlikely]] {
      fail_array_count(n);
      return 0;
    }
    return n;
  }

 private:
  // The primitives above are inline (every field of every frame goes through them); their error
  // paths are out of line, in reader.cc.
  template <typename T>
  T fixed() {
    if (remaining() < sizeof(T)) [[unlikely]] {
      fail_need(sizeof(T));
      return T{};
    }
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    v = swap_wire_order(v);  // the wire is big-endian
    return v;
  }
  // Reads a length prefix. Returns nullopt for null (only when nullable) or on error. Like Kafka's
  // generated readers, any negative length is null (a compact uvarint of 2^31 and up wraps to a
  // negative int32), which only a nullable field accepts.
  std::optional<int64_t> length_prefix(bool compact, bool wide, bool nullable, const char* what) {
    int32_t len;
    if (compact) {
      len = static_cast<int32_t>(uvarint() - 1u);
    } else {
      len = wide ? int32() : int16();
    }
    if (!ok()) return std::nullopt;
    if (len < 0) {
      if (!nullable) fail_null(what, len);
      return std::nullopt;
    }
    if (static_cast<uint64_t>(len) > remaining()) [[unlikely]] {
      fail_length(what, len);
      return std::nullopt;
    }
    return len;
  }
  uint32_t uvarint_slow();
  Bytes raw_slow(size_t n);
  [[gnu::cold]] void fail_need(size_t n);
  [[gnu::cold]] void fail_null(const char* what, int32_t len);
  [[gnu::cold]] void fail_length(const char* what, int32_t len);
  [[gnu::cold]] void fail_string_length(int64_t len);
  [[gnu::cold]] void fail_array_count(int32_t n);

  Bytes data_;
  size_t pos_ = 0;
  std::string error_;
  const char* message_ = "frame";
  const char* field_ = nullptr;
  int16_t version_ = -1;
};

}  // namespace kproxy::codec
