#include "codec/frame_reader.h"

#include <doctest/doctest.h>

#include <vector>

using kproxy::codec::Bytes;
using kproxy::codec::FrameReader;

namespace {

std::vector<uint8_t> frame(std::vector<uint8_t> body) {
  std::vector<uint8_t> f{0, 0, static_cast<uint8_t>(body.size() >> 8), static_cast<uint8_t>(body.size())};
  f.insert(f.end(), body.begin(), body.end());
  return f;
}

std::vector<std::vector<uint8_t>> feed_in_pieces(const std::vector<uint8_t>& stream, const std::vector<size_t>& cuts) {
  FrameReader reader(1024);
  std::vector<std::vector<uint8_t>> out;
  size_t prev = 0;
  std::vector<size_t> points = cuts;
  points.push_back(stream.size());
  for (size_t cut : points) {
    Bytes piece(stream.data() + prev, cut - prev);
    REQUIRE(reader.feed(piece, [&](Bytes f) {
      out.emplace_back(f.begin(), f.end());
      return true;
    }));
    prev = cut;
  }
  CHECK(reader.buffered() == 0);
  return out;
}

}  // namespace

TEST_CASE("FrameReader gives the same frames for every split of the stream") {
  // Given three frames, one of them empty (size 0 is legal: SASL)
  std::vector<std::vector<uint8_t>> frames{frame({1, 2, 3, 4, 5}), frame({}), frame({9, 8, 7, 6, 5, 4, 3, 2, 1})};
  std::vector<uint8_t> stream;
  for (auto& f : frames) stream.insert(stream.end(), f.begin(), f.end());
  // When the stream is cut at every single offset, and at every pair of offsets
  for (size_t a = 0; a <= stream.size(); ++a) {
    CHECK(feed_in_pieces(stream, {a}) == frames);
    for (size_t b = a; b <= stream.size(); ++b) CHECK(feed_in_pieces(stream, {a, b}) == frames);
  }
  // And byte by byte
  std::vector<size_t> every;
  for (size_t i = 1; i < stream.size(); ++i) every.push_back(i);
  CHECK(feed_in_pieces(stream, every) == frames);
}

TEST_CASE("FrameReader refuses a negative size") {
  FrameReader reader(1024);
  std::vector<uint8_t> bad{0xff, 0xff, 0xff, 0xfe, 0};
  CHECK_FALSE(reader.feed(bad, [](Bytes) { return true; }));
  CHECK(reader.error() == "negative frame size -2");
  CHECK_FALSE(reader.looks_like_tls());
}

TEST_CASE("FrameReader refuses a size above its limit, even split across pieces") {
  FrameReader reader(100);
  std::vector<uint8_t> a{0x00, 0x00}, b{0x01, 0x00};
  CHECK(reader.feed(a, [](Bytes) { return true; }));
  CHECK_FALSE(reader.feed(b, [](Bytes) { return true; }));
  CHECK(reader.error() == "frame size 256 exceeds the limit of 100 bytes");
}

TEST_CASE("FrameReader recognises a TLS ClientHello on a plaintext port") {
  FrameReader reader(100 << 20);
  std::vector<uint8_t> hello{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03};
  CHECK_FALSE(reader.feed(hello, [](Bytes) { return true; }));
  CHECK(reader.looks_like_tls());
  CHECK(reader.error().find("TLS") != std::string::npos);
}

TEST_CASE("FrameReader stops when the callback says so") {
  FrameReader reader(1024);
  auto f = frame({1});
  std::vector<uint8_t> stream = f;
  stream.insert(stream.end(), f.begin(), f.end());
  int seen = 0;
  CHECK(reader.feed(stream, [&](Bytes) { ++seen; return false; }));
  CHECK(seen == 1);
  CHECK(reader.frames() == 1);
}

TEST_CASE("FrameReader hands out whole frames as views into the piece without copying") {
  FrameReader reader(1024);
  auto f = frame({1, 2, 3});
  const uint8_t* seen = nullptr;
  CHECK(reader.feed(f, [&](Bytes b) { seen = b.data(); return true; }));
  CHECK(seen == f.data());
}
