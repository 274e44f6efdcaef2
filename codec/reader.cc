#include "codec/reader.h"

#include <bit>

namespace kproxy::codec {

void Reader::fail(std::string_view reason) {
  if (!error_.empty()) return;
  error_ = message_;
  if (version_ >= 0) error_ += " v" + std::to_string(version_);
  if (field_ != nullptr) {
    error_ += ": field ";
    error_ += field_;
  }
  error_ += " at offset " + std::to_string(pos_) + ": ";
  error_ += reason;
  pos_ = data_.size();  // every later read sees no bytes
}

double Reader::float64() {
  return std::bit_cast<double>(fixed<uint64_t>());
}

Uuid Reader::uuid() {
  Uuid u{};
  Bytes b = raw(16);
  if (b.size() == 16) std::memcpy(u.data(), b.data(), 16);
  return u;
}

uint32_t Reader::uvarint() {
  uint32_t value = 0;
  for (int i = 0; i < 5; ++i) {
    if (!ok()) return 0;
    if (remaining() == 0) {
      fail("varint runs past the end of the frame");
      return 0;
    }
    uint8_t b = data_[pos_++];
    if (i == 4 && (b & 0xf0) != 0) {
      fail("varint longer than 5 bytes or above 32 bits");
      return 0;
    }
    value |= static_cast<uint32_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) return value;
  }
  return value;
}

int32_t Reader::varint() {
  uint32_t u = uvarint();
  return static_cast<int32_t>((u >> 1) ^ (~(u & 1) + 1));
}

int64_t Reader::varlong() {
  uint64_t value = 0;
  for (int i = 0; i < 10; ++i) {
    if (!ok()) return 0;
    if (remaining() == 0) {
      fail("varlong runs past the end of the frame");
      return 0;
    }
    uint8_t b = data_[pos_++];
    if (i == 9 && (b & 0xfe) != 0) {
      fail("varlong longer than 10 bytes or above 64 bits");
      return 0;
    }
    value |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) return static_cast<int64_t>((value >> 1) ^ (~(value & 1) + 1));
  }
  return 0;
}

Bytes Reader::raw(size_t n) {
  if (!ok()) return {};
  if (n > remaining()) {
    fail("length " + std::to_string(n) + " runs past the end (" + std::to_string(remaining()) + " bytes left)");
    return {};
  }
  Bytes out = data_.subspan(pos_, n);
  pos_ += n;
  return out;
}

// Reads a length prefix. Returns nullopt for null (only when nullable) or on error.
// Reads a length prefix. Returns nullopt for null (only when nullable) or on error. Like Kafka's
// generated readers, any negative length is null (a compact uvarint of 2^31 and up wraps to a
// negative int32), which only a nullable field accepts.
std::optional<int64_t> Reader::length_prefix(bool compact, bool wide, bool nullable, const char* what) {
  int32_t len;
  if (compact) {
    len = static_cast<int32_t>(uvarint() - 1u);
  } else {
    len = wide ? int32() : int16();
  }
  if (!ok()) return std::nullopt;
  if (len < 0) {
    if (nullable) return std::nullopt;
    fail(std::string("null in a non-nullable field (") + what + " length " + std::to_string(len) + ")");
    return std::nullopt;
  }
  if (static_cast<uint64_t>(len) > remaining()) {
    fail(std::string(what) + " length " + std::to_string(len) + " exceeds the " + std::to_string(remaining()) + " bytes left");
    return std::nullopt;
  }
  return len;
}

std::string_view Reader::string(bool compact) {
  auto len = length_prefix(compact, false, false, "string");
  if (!len) return {};
  if (*len > kMaxStringLength) {
    fail("string length " + std::to_string(*len) + " is above Kafka's limit of 32767 bytes");
    return {};
  }
  Bytes b = raw(static_cast<size_t>(*len));
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::optional<std::string_view> Reader::nullable_string(bool compact) {
  if (!ok()) return std::nullopt;
  auto len = length_prefix(compact, false, true, "string");
  if (!len) return std::nullopt;
  if (*len > kMaxStringLength) {
    fail("string length " + std::to_string(*len) + " is above Kafka's limit of 32767 bytes");
    return std::nullopt;
  }
  Bytes b = raw(static_cast<size_t>(*len));
  return std::string_view{reinterpret_cast<const char*>(b.data()), b.size()};
}

Bytes Reader::bytes(bool compact) {
  auto len = length_prefix(compact, true, false, "bytes");
  if (!len) return {};
  return raw(static_cast<size_t>(*len));
}

std::optional<Bytes> Reader::nullable_bytes(bool compact) {
  if (!ok()) return std::nullopt;
  auto len = length_prefix(compact, true, true, "bytes");
  if (!len) return std::nullopt;
  return raw(static_cast<size_t>(*len));
}

int32_t Reader::array_length(bool compact) {
  if (!ok()) return 0;
  // Kafka's readers take any negative count as null (see length_prefix).
  int32_t n = compact ? static_cast<int32_t>(uvarint() - 1u) : int32();
  if (!ok()) return 0;
  if (n < 0) return -1;
  if (static_cast<size_t>(n) > remaining()) {
    fail("array count " + std::to_string(n) + " exceeds the " + std::to_string(remaining()) + " bytes left");
    return 0;
  }
  return n;
}

}  // namespace kproxy::codec
