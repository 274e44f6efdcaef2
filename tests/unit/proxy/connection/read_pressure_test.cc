#include "proxy/connection/read_pressure.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/unit/support/loop.h"

using kproxy::codec::FrameMemoryBudget;
using kproxy::codec::kFrameMemoryReserve;
using kproxy::connection::PausableReader;
using kproxy::connection::plan_read_pressure;
using kproxy::connection::PressureHolder;
using kproxy::connection::PressurePlan;
using kproxy::connection::ReadPauseMetrics;
using kproxy::connection::ReadPressure;

namespace {
constexpr size_t MiB = size_t{1} << 20;

/// A connection as ReadPressure sees it: what it holds, and whether it is being read.
struct FakeReader : PausableReader {
  FakeReader(FrameMemoryBudget& b, size_t held, size_t missing) : budget(b), held(held), missing(missing) { budget.hold(held); }
  ~FakeReader() override { budget.release(held); }
  size_t partial_bytes() const override { return held; }
  size_t partial_missing() const override { return missing; }
  void pause_reads(const std::string& why) override {
    reading = false;
    last_why = why;
    ++pauses;
  }
  void resume_reads() override { reading = true; }
  /// `n` more bytes arrived (or, negative, the frame went out).
  void grow(FrameMemoryBudget& b, size_t n) {
    b.hold(n);
    held += n;
    missing -= n;
  }
  FrameMemoryBudget& budget;
  size_t held, missing;
  bool reading = true;
  int pauses = 0;
  std::string last_why;
};
}  // namespace

TEST_CASE("read pressure plan: over the limit the holders above the reserve stop, largest first; small ones never") {
  // Issue #46's attack at a tenth of the scale: 100 MiB budget, attackers holding 16 MiB each
  // of a 100 MiB frame, a well-behaved client with a 300 KiB partial request.
  std::vector<PressureHolder> h = {
      {16 * MiB, 84 * MiB, false}, {20 * MiB, 80 * MiB, false}, {300 << 10, 100 << 10, false}, {18 * MiB, 82 * MiB, false}};
  PressurePlan plan = plan_read_pressure(h, 110 * MiB, 100 * MiB, 100 * MiB / 16);
  CHECK(plan.pause == std::vector<size_t>{1, 3, 0});
  CHECK(plan.resume.empty());
  // Under the limit but above the resume mark: nothing moves either way.
  h[1].paused = h[3].paused = h[0].paused = true;
  plan = plan_read_pressure(h, 95 * MiB, 100 * MiB, 100 * MiB / 16);
  CHECK(plan.pause.empty());
  CHECK(plan.resume.empty());
  // At the resume mark (seven eighths) everyone paused reads again.
  plan = plan_read_pressure(h, 100 * MiB - 100 * MiB / 8, 100 * MiB, 100 * MiB / 16);
  CHECK(plan.pause.empty());
  CHECK(plan.resume == std::vector<size_t>{0, 1, 3});
  // No limit: nothing stays paused.
  plan = plan_read_pressure(h, 500 * MiB, 0, 0);
  CHECK(plan.resume == std::vector<size_t>{0, 1, 3});
}

TEST_CASE("read pressure plan: frames closest to complete keep going within the allowance, fewest missing first") {
  // Large legitimate requests arriving together: all would stop and wait for each other (until
  // their deadline) if none could finish. Those that fit the allowance finish and free memory.
  std::vector<PressureHolder> h = {
      {30 * MiB, 20 * MiB, false},  // far from done: stops
      {10 * MiB, 2 * MiB, true},    // close, paused earlier: resumes
      {12 * MiB, 3 * MiB, false},   // close: keeps going
      {40 * MiB, 4 * MiB, false},   // 2 + 3 + 4 > 6 MiB allowance: stops
  };
  PressurePlan plan = plan_read_pressure(h, 120 * MiB, 100 * MiB, 6 * MiB);
  CHECK(plan.resume == std::vector<size_t>{1});
  CHECK(plan.pause == std::vector<size_t>{3, 0});
}

TEST_CASE("ReadPressure pauses the largest holders of its loop over the limit and reads them again once the budget frees up") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    FrameMemoryBudget budget(64 * MiB);
    kproxy::metrics::ProxyMetrics metrics;
    ReadPauseMetrics pauses(metrics);
    kproxy::util::SteadyClock clock;
    ReadPressure pressure(&loop, clock, budget, pauses);
    const int64_t paused_before = pauses.paused_for_memory();
    auto a = std::make_unique<FakeReader>(budget, 20 * MiB, 80 * MiB);
    FakeReader b(budget, 30 * MiB, 70 * MiB);
    FakeReader small(budget, 512 << 10, 100 << 10);
    pressure.after_read(*a);
    pressure.after_read(b);
    pressure.after_read(small);
    CHECK(pressure.tracked() == 2);  // the small one is not even tracked
    CHECK(pressure.paused() == 0);   // 50.5 MiB held: under the limit
    // a grows past the limit: both large holders stop, the small one reads on.
    a->grow(budget, 14 * MiB);
    pressure.after_read(*a);
    CHECK(budget.over_limit());
    CHECK(pressure.paused() == 2);
    CHECK_FALSE(a->reading);
    CHECK_FALSE(b.reading);
    CHECK(small.reading);
    CHECK(pauses.paused_for_memory() - paused_before == 2);
    CHECK(b.last_why.find(
              "(limits.max_buffered_frame_bytes), and this one holds 31457280 bytes of a request 73400320 bytes short of whole") !=
          std::string::npos);
    // The small one grows too, over the limit, and is still read: below the reserve nobody stops.
    small.grow(budget, 400 << 10);
    pressure.after_read(small);
    CHECK(small.reading);
    CHECK(small.held <= kFrameMemoryReserve);
    // a closes (its deadline): forgotten at once, its 34 MiB come back when the connection is
    // gone, and the next recheck reads b again.
    pressure.forget(*a);
    CHECK(pauses.paused_for_memory() - paused_before == 1);
    CHECK_FALSE(b.reading);  // a's bytes are still held: still over the limit
    a.reset();
    auto start = std::chrono::steady_clock::now();
    while (!b.reading && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) uv_run(&loop, UV_RUN_ONCE);
    CHECK(b.reading);
    CHECK(pressure.paused() == 0);
    CHECK(pauses.paused_for_memory() - paused_before == 0);
    pressure.forget(b);
    pressure.forget(small);
    CHECK(pressure.tracked() == 0);
    pressure.stop();
  }
  kproxy::testing::close_loop(&loop);
}

TEST_CASE("ReadPressure: memory freed elsewhere (another worker) resumes the paused holders at the next recheck") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    FrameMemoryBudget budget(16 * MiB);
    kproxy::metrics::ProxyMetrics metrics;
    ReadPauseMetrics pauses(metrics);
    kproxy::util::SteadyClock clock;
    ReadPressure pressure(&loop, clock, budget, pauses);
    FakeReader a(budget, 10 * MiB, 50 * MiB);
    budget.hold(10 * MiB);  // another worker's partial frames
    pressure.after_read(a);
    CHECK(pressure.paused() == 1);
    CHECK_FALSE(a.reading);
    budget.release(10 * MiB);  // ...finish there: nothing happens on this loop but the recheck
    auto start = std::chrono::steady_clock::now();
    while (!a.reading && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) uv_run(&loop, UV_RUN_ONCE);
    CHECK(a.reading);
    CHECK(pressure.paused() == 0);
    pressure.forget(a);
    pressure.stop();
  }
  kproxy::testing::close_loop(&loop);
}
