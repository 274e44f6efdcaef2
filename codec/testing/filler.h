// Filler: the source of values for the generated `fill()` functions (codec/generated/testing/fill.h).
//
// Two modes: *smallest* (zeros, empty strings and bytes, one element per array, no nulls, no
// tagged fields) and *random* (seeded, so a failure can be replayed from the printed seed).
// Strings and bytes handed out are views into storage the Filler owns: keep it alive as long as
// the filled message.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>

#include "codec/reader.h"
#include "codec/tagged_fields.h"

namespace kproxy::codec::testing {

class Filler {
 public:
  /// Smallest instances.
  Filler() = default;
  /// Random instances from `seed`.
  explicit Filler(uint64_t seed) : smallest_(false), rng_(seed) {}

  bool smallest() const { return smallest_; }

  int8_t i8() { return static_cast<int8_t>(bits()); }
  int16_t i16() { return static_cast<int16_t>(bits()); }
  int32_t i32() { return static_cast<int32_t>(bits()); }
  int64_t i64() { return static_cast<int64_t>(bits()); }
  uint16_t u16() { return static_cast<uint16_t>(bits()); }
  uint32_t u32() { return static_cast<uint32_t>(bits()); }
  /// A finite double (random mode).
  double f64() { return smallest_ ? 0.0 : static_cast<double>(i32()) / 8.0; }
  bool boolean() { return !smallest_ && (rng_() & 1) != 0; }
  Uuid uuid() {
    Uuid u{};
    if (!smallest_)
      for (auto& b : u) b = static_cast<uint8_t>(rng_());
    return u;
  }
  /// Printable text of 0..12 bytes (random), "" (smallest).
  std::string_view string() {
    if (smallest_) return {};
    std::string& s = store_.emplace_back(static_cast<size_t>(below(13)), 'a');
    for (auto& c : s) c = static_cast<char>('a' + below(26));
    return s;
  }
  Bytes bytes() {
    if (smallest_) return {};
    std::string& s = store_.emplace_back(static_cast<size_t>(below(17)), '\0');
    for (auto& c : s) c = static_cast<char>(rng_());
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
  }
  /// Elements for an array: 1 (smallest), 0..3 (random). Tagged arrays may be empty too.
  size_t count(bool tagged) {
    (void)tagged;
    return smallest_ ? 1 : static_cast<size_t>(below(4));
  }
  /// Whether a nullable value should be null: never (smallest), one in four (random).
  bool null() { return !smallest_ && below(4) == 0; }
  /// Adds 0..2 unknown tagged fields (random mode) with tags not in `known`, ascending.
  void unknown_tags(UnknownTaggedFields& out, std::initializer_list<uint32_t> known) {
    out.clear();
    if (smallest_) return;
    const uint64_t n = below(3);
    uint32_t tag = static_cast<uint32_t>(below(3));
    for (uint64_t i = 0; i < n; ++i) {
      while (std::find(known.begin(), known.end(), tag) != known.end()) ++tag;
      out.push_back({tag, bytes()});
      tag += 1 + static_cast<uint32_t>(below(i == 0 ? 4 : 300));  // sometimes a 2-byte tag varint
    }
  }

 private:
  uint64_t bits() { return smallest_ ? 0 : rng_(); }
  uint64_t below(uint64_t n) { return rng_() % n; }

  bool smallest_ = true;
  std::mt19937_64 rng_{0};
  std::deque<std::string> store_;
};

}  // namespace kproxy::codec::testing
