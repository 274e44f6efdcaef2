#include "codec/frame_memory_budget.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "codec/frame_reader.h"

using kproxy::codec::Bytes;
using kproxy::codec::FrameMemoryBudget;
using kproxy::codec::FrameReader;

namespace {
/// The first `n` bytes of a frame announcing `size` body bytes.
std::vector<uint8_t> frame_start(uint32_t size, size_t n) {
  std::vector<uint8_t> v{static_cast<uint8_t>(size >> 24), static_cast<uint8_t>(size >> 16), static_cast<uint8_t>(size >> 8),
                         static_cast<uint8_t>(size)};
  v.resize(4 + n, 0xab);
  return v;
}
}  // namespace

TEST_CASE("frame memory budget: charges up to the limit, refunds, 0 is unlimited") {
  FrameMemoryBudget b(100);
  CHECK(b.charge(60));
  CHECK_FALSE(b.charge(41));
  CHECK(b.used() == 60);
  CHECK(b.charge(40));
  b.refund(100);
  CHECK(b.used() == 0);
  FrameMemoryBudget unlimited;
  CHECK(unlimited.charge(size_t{1} << 40));
  b.set_limit(10);
  CHECK_FALSE(b.charge(11));
}

/// Feeds `n` bytes of filler to `r` the way TcpStream does: into read_space() when it offers
/// room (bytes read in place), else through a read buffer of 64 KiB.
static void feed_like_a_socket(FrameReader& r, size_t n) {
  std::vector<uint8_t> shared(64 << 10, 0xab);
  while (n > 0) {
    std::span<uint8_t> room = r.read_space();
    size_t k = std::min(n, room.empty() ? shared.size() : room.size());
    if (!room.empty()) std::fill_n(room.data(), k, uint8_t{0xab});  // what the kernel would write there
    Bytes piece = room.empty() ? Bytes(shared.data(), k) : Bytes(room.data(), k);
    REQUIRE(r.feed(piece, [](Bytes) { return true; }));
    n -= k;
  }
}

TEST_CASE("frame memory budget: a partial frame is charged the bytes received, not the room reserved ahead of them") {
  // Issue #46: 16 connections that sent 16 MiB each of a 100 MiB frame showed as 512 MiB held,
  // because the capacity was charged and a buffer doubles just before the bytes fill it.
  FrameMemoryBudget budget(512 << 20);
  FrameReader r(100 << 20, &budget);
  auto start = frame_start(100 << 20, 1000);
  REQUIRE(r.feed(start, [](Bytes) { return true; }));
  feed_like_a_socket(r, (16 << 20) - start.size());
  (void)r.read_space();  // libuv asks for room once more, then its read finds nothing (the sender stalls)
  CHECK(r.buffered() == (16u << 20));
  CHECK(r.reserved() > r.buffered());   // the buffer has grown ahead of the bytes...
  CHECK(budget.used() == (16u << 20));  // ...and only the bytes are charged
  CHECK(r.missing() == (100u << 20) + 4 - (16u << 20));
}

TEST_CASE("frame memory budget: over the limit nobody is refused; the budget only says it is over") {
  FrameMemoryBudget budget(10 << 20);
  auto none = [](Bytes) { return true; };
  std::vector<std::unique_ptr<FrameReader>> readers;
  for (int i = 0; i < 4; ++i) {
    readers.push_back(std::make_unique<FrameReader>(8 << 20, &budget));
    auto start = frame_start(8 << 20, 1000);
    REQUIRE(readers.back()->feed(start, none));
    feed_like_a_socket(*readers.back(), (3 << 20) - start.size());  // 3 MiB each: 12 MiB in all
    CHECK_FALSE(readers.back()->over_budget());
  }
  CHECK(budget.used() == (12u << 20));
  CHECK(budget.over_limit());
  CHECK(budget.resume_mark() == (10u << 20) - (10u << 20) / 8);
  // One finishes: its bytes come back.
  feed_like_a_socket(*readers[0], (8u << 20) + 4 - (3u << 20));
  CHECK(readers[0]->frames() == 1);
  CHECK(budget.used() == (9u << 20));
  CHECK_FALSE(budget.over_limit());
  readers.clear();  // readers destroyed mid-frame give their bytes back too
  CHECK(budget.used() == 0);
}

TEST_CASE("frame memory budget: only a frame larger than the whole budget is refused") {
  // The config keeps the budget at least the frame limits; a reload that lowers it leaves readers
  // with the old frame limit, and a frame that could never be held is refused with a reason.
  FrameMemoryBudget budget(1 << 20);
  FrameReader r(8 << 20, &budget);
  auto start = frame_start(2 << 20, 100);
  CHECK_FALSE(r.feed(start, [](Bytes) { return true; }));
  CHECK(r.over_budget());
  CHECK(r.error() ==
        "a 2097156-byte frame is larger than all partial frames may hold together (1048576 bytes, limits.max_buffered_frame_bytes)");
  CHECK(budget.used() == 0);
  FrameReader small(8 << 20, &budget);
  CHECK(small.feed(frame_start(1000, 10), [](Bytes) { return true; }));
  CHECK(budget.used() == 14);
}

TEST_CASE("frame memory budget: a taken frame's buffer is no longer charged") {
  FrameMemoryBudget budget(64 << 20);
  FrameReader r(8 << 20, &budget);
  auto start = frame_start(100000, 10);
  CHECK(r.feed(start, [](Bytes) { return true; }));
  CHECK(budget.used() == 14);
  std::vector<uint8_t> rest(100000 - 10, 1);
  kproxy::codec::FrameBuffer taken;
  CHECK(r.feed(rest, [&](Bytes f) {
    if (r.holds(f)) taken = r.take_frame();
    return true;
  }));
  CHECK(taken.size() == 100004);
  CHECK(budget.used() == 0);
}
