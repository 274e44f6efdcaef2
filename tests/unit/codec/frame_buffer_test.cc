#include "codec/frame_buffer.h"

#include <doctest/doctest.h>

#include <cstring>
#include <utility>
#include <vector>

using kproxy::codec::Bytes;
using kproxy::codec::FrameBuffer;

TEST_CASE("FrameBuffer appends, keeps its contents when it grows, and releases its memory") {
  FrameBuffer b;
  CHECK(b.empty());
  CHECK(b.capacity() == 0);
  std::vector<uint8_t> piece(1000);
  for (size_t i = 0; i < piece.size(); ++i) piece[i] = static_cast<uint8_t>(i * 7);
  for (int i = 0; i < 50; ++i) b.append(piece);
  REQUIRE(b.size() == 50 * piece.size());
  CHECK(b.capacity() >= b.size());
  for (int i = 0; i < 50; ++i) CHECK(std::memcmp(b.data() + i * piece.size(), piece.data(), piece.size()) == 0);
  b.release();
  CHECK(b.size() == 0);
  CHECK(b.capacity() == 0);
  CHECK(b.data() == nullptr);
}

TEST_CASE("FrameBuffer: bytes written into spare() become contents with commit()") {
  FrameBuffer b;
  b.append(std::vector<uint8_t>{1, 2});
  b.reserve(10);
  CHECK(b.capacity() == 10);
  auto room = b.spare();
  REQUIRE(room.size() == 8);
  CHECK(room.data() == b.data() + 2);
  room[0] = 3;
  room[1] = 4;
  b.commit(2);
  CHECK(std::vector<uint8_t>(b.bytes().begin(), b.bytes().end()) == std::vector<uint8_t>{1, 2, 3, 4});
  CHECK(b.spare().size() == 6);
}

TEST_CASE("FrameBuffer moves its memory instead of copying it") {
  FrameBuffer a;
  a.append(std::vector<uint8_t>(4096, 0x5a));
  const uint8_t* p = a.data();
  FrameBuffer b(std::move(a));
  CHECK(b.data() == p);
  CHECK(b.size() == 4096);
  CHECK(a.empty());            // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  CHECK(a.data() == nullptr);  // NOLINT(bugprone-use-after-move)
  FrameBuffer c;
  c.append(std::vector<uint8_t>{1});
  c = std::move(b);
  CHECK(c.data() == p);
  CHECK(c.size() == 4096);
}
