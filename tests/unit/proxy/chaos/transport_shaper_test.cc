#include "proxy/chaos/transport_shaper.h"

#include <chrono>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "tests/unit/support/loop.h"
#include "tests/unit/support/text.h"

using kproxy::chaos::TransportShaper;
using kproxy::chaos::TransportToxic;
using Clock = std::chrono::steady_clock;

namespace {
// Records what the shaper writes: each write, and each flush as a boundary.
struct Recorder {
  std::vector<std::string> writes;
  std::vector<Clock::time_point> write_times;
  int flushes = 0;
  std::string all() const {
    std::string s;
    for (const auto& w : writes) s += w;
    return s;
  }
};

using kproxy::testing::bytes_of;
using kproxy::testing::close_loop;

void run_until_idle(uv_loop_t* loop, TransportShaper& shaper) {
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!shaper.idle() && Clock::now() < deadline) uv_run(loop, UV_RUN_ONCE);
}
}  // namespace

TEST_CASE("without a toxic the shaper writes through at once") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Recorder rec;
  {
    TransportShaper shaper(
        &loop, [&](kproxy::codec::Bytes b) { rec.writes.emplace_back(b.begin(), b.end()); }, [&] { ++rec.flushes; });
    shaper.send(bytes_of("hello"), nullptr);
    TransportToxic off;
    shaper.send(bytes_of("world"), &off);
    CHECK(rec.writes == std::vector<std::string>{"hello", "world"});
    CHECK(rec.flushes == 0);  // the caller flushes, as for any write
    CHECK(shaper.idle());
  }
  close_loop(&loop);
}

TEST_CASE("the slicer cuts a write into pieces of N bytes, each flushed, with the delay between them") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Recorder rec;
  {
    TransportShaper shaper(
        &loop,
        [&](kproxy::codec::Bytes b) {
          rec.writes.emplace_back(b.begin(), b.end());
          rec.write_times.push_back(Clock::now());
        },
        [&] { ++rec.flushes; });
    TransportToxic slice;
    slice.slice_bytes = 4;
    slice.slice_delay = std::chrono::milliseconds(10);
    auto t0 = Clock::now();
    shaper.send(bytes_of("0123456789"), &slice);
    shaper.send(bytes_of("tail"), nullptr);  // waits behind the slices: order holds
    CHECK(rec.writes == std::vector<std::string>{"0123"});
    run_until_idle(&loop, shaper);
    CHECK(rec.writes == std::vector<std::string>{"0123", "4567", "89", "tail"});
    CHECK(rec.flushes >= 3);
    CHECK(rec.write_times[2] - t0 >= std::chrono::milliseconds(20));
    CHECK(shaper.queued_bytes() == 0);
  }
  close_loop(&loop);
}

TEST_CASE("the bandwidth limit spreads bytes at the configured rate") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Recorder rec;
  {
    std::vector<Clock::time_point> written;  // when each piece was written
    TransportShaper shaper(
        &loop,
        [&](kproxy::codec::Bytes b) {
          rec.writes.emplace_back(b.begin(), b.end());
          written.push_back(Clock::now());
        },
        [&] { ++rec.flushes; });
    TransportToxic bw;
    bw.bytes_per_second = 10000;  // 200-byte pieces, 20 ms apart
    std::string payload(2000, 'x');
    auto t0 = Clock::now();
    shaper.send(bytes_of(payload), &bw);
    CHECK(shaper.queued_bytes() == 1800);  // the first piece left at once
    run_until_idle(&loop, shaper);
    auto took = Clock::now() - t0;
    CHECK(rec.all() == payload);
    CHECK(rec.writes.size() == 10);
    // 2000 bytes at 10 kB/s: the last piece starts 9 x 20 ms after the first.
    CHECK(took >= std::chrono::milliseconds(180));
    CHECK(took < std::chrono::milliseconds(1500));
    // The link stays busy: the next send waits for the previous one's time on the wire, 2000
    // bytes = 200 ms from the first piece (on a slow machine that time may have passed already;
    // then it goes at once).
    shaper.send(bytes_of(std::string(200, 'y')), &bw);
    run_until_idle(&loop, shaper);
    REQUIRE(rec.writes.size() == 11);
    CHECK(written[10] - t0 >= std::chrono::milliseconds(200));
  }
  close_loop(&loop);
}

TEST_CASE("shutdown drops what is queued and writes nothing more") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Recorder rec;
  {
    TransportShaper shaper(
        &loop, [&](kproxy::codec::Bytes b) { rec.writes.emplace_back(b.begin(), b.end()); }, [&] { ++rec.flushes; });
    TransportToxic slice;
    slice.slice_bytes = 1;
    slice.slice_delay = std::chrono::milliseconds(50);
    shaper.send(bytes_of("abc"), &slice);
    CHECK(rec.writes.size() == 1);
    shaper.shutdown();
    CHECK(shaper.idle());
    shaper.send(bytes_of("more"), nullptr);
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(rec.writes.size() == 1);
  }
  close_loop(&loop);
}

TEST_CASE("a flush that closes the connection stops the slicer mid-frame") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Recorder rec;
  {
    TransportShaper* self = nullptr;
    TransportShaper shaper(
        &loop, [&](kproxy::codec::Bytes b) { rec.writes.emplace_back(b.begin(), b.end()); },
        [&] {
          if (++rec.flushes == 2) self->shutdown();  // e.g. the write failed and the connection closed
        });
    self = &shaper;
    TransportToxic slice;
    slice.slice_bytes = 2;
    shaper.send(bytes_of("aabbccdd"), &slice);  // no delay: every slice is due now
    CHECK(rec.writes == std::vector<std::string>{"aa", "bb"});
    CHECK(shaper.idle());
  }
  close_loop(&loop);
}
