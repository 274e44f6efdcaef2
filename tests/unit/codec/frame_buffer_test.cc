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

TEST_CASE("frame buffer: a large block released goes to this thread's cache and serves the next large buffer") {
  FrameBuffer::drop_cached_blocks();
  const uint8_t* first = nullptr;
  {
    FrameBuffer big;
    big.reserve(1 << 20);
    first = big.data();
    CHECK(FrameBuffer::cached_bytes() == 0);
  }
  CHECK(FrameBuffer::cached_bytes() == (1u << 20));
  {
    FrameBuffer next;
    next.reserve(300 << 10);  // smaller than the kept block: served by it
    CHECK(next.data() == first);
    CHECK(next.capacity() == (1u << 20));
    CHECK(FrameBuffer::cached_bytes() == 0);
    FrameBuffer small;
    small.reserve(4 << 10);  // small blocks come from malloc, and are not kept
  }
  CHECK(FrameBuffer::cached_bytes() == (1u << 20));

  // Bounded: blocks over kCachedBlockMax are freed, and at most kCachedBlocks / kCachedBytes are kept.
  {
    FrameBuffer huge;
    huge.reserve(FrameBuffer::kCachedBlockMax + 1);
  }
  CHECK(FrameBuffer::cached_bytes() == (1u << 20));
  {
    std::vector<FrameBuffer> many(FrameBuffer::kCachedBlocks + 2);
    for (auto& b : many) b.reserve(FrameBuffer::kCachedBlockMax);
  }
  CHECK(FrameBuffer::cached_bytes() <= FrameBuffer::kCachedBytes);
  CHECK(FrameBuffer::cached_bytes() >= FrameBuffer::kCachedBlockMax);
  CHECK(FrameBuffer::drop_cached_blocks() > 0);
  CHECK(FrameBuffer::cached_bytes() == 0);
}

TEST_CASE("frame buffer: a buffer growing past the cache's minimum moves into a kept block with its contents") {
  FrameBuffer::drop_cached_blocks();
  {
    FrameBuffer warm;
    warm.reserve(1 << 20);
  }  // leaves a 1 MiB block in the cache
  FrameBuffer growing;
  std::vector<uint8_t> part(64 << 10);
  for (size_t i = 0; i < part.size(); ++i) part[i] = static_cast<uint8_t>(i * 7);
  growing.append(Bytes(part.data(), part.size()));
  growing.reserve(256 << 10);
  CHECK(growing.capacity() == (1u << 20));  // the kept block, not a new mapping
  CHECK(growing.size() == part.size());
  CHECK(std::memcmp(growing.data(), part.data(), part.size()) == 0);
  CHECK(FrameBuffer::cached_bytes() == 0);
  growing.release();
  CHECK(FrameBuffer::cached_bytes() == (1u << 20));
  FrameBuffer::drop_cached_blocks();
}
