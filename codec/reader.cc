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

double Reader::float64() { return std::bit_cast<double>(fixed<uint64_t>()); }

Uuid Reader::uuid() {
  Uuid u{};
  Bytes b = raw(16);
  if (b.size() == 16) std::memcpy(u.data(), b.data(), 16);
  return u;
}

void Reader::fail_need(size_t n) {
  if (ok()) fail("need " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left");
}

void Reader::fail_null(const char* what, int32_t len) {
  fail(std::string("null in a non-nullable field (") + what + " length " + std::to_string(len) + ")");
}

void Reader::fail_length(const char* what, int32_t len) {
  fail(std::string(what) + " length " + std::to_string(len) + " exceeds the " + std::to_string(remaining()) + " bytes left");
}

void Reader::fail_string_length(int64_t len) { fail("string length " + std::to_string(len) + " is above Kafka's limit of 32767 bytes"); }

void Reader::fail_array_count(int32_t n) {
  fail("array count " + std::to_string(n) + " exceeds the " + std::to_string(remaining()) + " bytes left");
}

// The multi-byte (and failing) part of uvarint(); the header has the one-byte case.
uint32_t Reader::uvarint_slow() {
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

// raw() past the end, or after an error.
Bytes Reader::raw_slow(size_t n) {
  if (!ok()) return {};
  if (n > remaining()) {
    fail("length " + std::to_string(n) + " runs past the end (" + std::to_string(remaining()) + " bytes left)");
    return {};
  }
  Bytes out = data_.subspan(pos_, n);
  pos_ += n;
  return out;
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

}  // namespace kproxy::codec
