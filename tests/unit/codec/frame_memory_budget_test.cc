#include "codec/frame_memory_budget.h"

#include <doctest/doctest.h>

#include <memory>
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

TEST_CASE("frame memory budget: partial frames of many readers are capped, the readers after the cap refused") {
  // Issue #15: 16 connections × 16 MiB of partial frames cost +448 MB. With a budget, the reader
  // that would pass it refuses its frame; the others are untouched and every byte comes back.
  FrameMemoryBudget budget(10 << 20);
  auto start = frame_start(4 << 20, 1000);  // a 4 MiB frame: 4 MiB reserved at once
  auto a = std::make_unique<FrameReader>(8 << 20, &budget);
  auto b = std::make_unique<FrameReader>(8 << 20, &budget);
  auto c = std::make_unique<FrameReader>(8 << 20, &budget);
  auto none = [](Bytes) { return true; };
  CHECK(a->feed(start, none));
  CHECK(b->feed(start, none));
  CHECK(budget.used() >= (8u << 20));
  CHECK_FALSE(c->feed(start, none));
  CHECK(c->over_budget());
  CHECK(c->error().starts_with("partial frames of all connections would hold more than 10485760 bytes (limits.max_buffered_frame_bytes"));
  // A finished frame gives its memory back.
  std::vector<uint8_t> rest((4u << 20) - 1000, 0xcd);
  int frames = 0;
  CHECK(a->feed(rest, [&](Bytes f) {
    ++frames;
    return f.size() == (4u << 20) + 4;
  }));
  CHECK(frames == 1);
  auto d = std::make_unique<FrameReader>(8 << 20, &budget);
  CHECK(d->feed(start, none));  // room again
  // Readers destroyed mid-frame give their memory back too.
  a.reset();
  b.reset();
  c.reset();
  d.reset();
  CHECK(budget.used() == 0);
}

TEST_CASE("frame memory budget: a taken frame's buffer is no longer charged") {
  FrameMemoryBudget budget(64 << 20);
  FrameReader r(8 << 20, &budget);
  auto start = frame_start(100000, 10);
  CHECK(r.feed(start, [](Bytes) { return true; }));
  CHECK(budget.used() >= 100000);
  std::vector<uint8_t> rest(100000 - 10, 1);
  kproxy::codec::FrameBuffer taken;
  CHECK(r.feed(rest, [&](Bytes f) {
    if (r.holds(f)) taken = r.take_frame();
    return true;
  }));
  CHECK(taken.size() == 100004);
  CHECK(budget.used() == 0);
}
