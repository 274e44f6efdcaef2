#include "proxy/chaos/transport_shaper.h"

#include <chrono>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "tests/unit/support/loop.h"
#include "tests/unit/support/manual_clock.h"
#include "tests/unit/support/text.h"

using kproxy::chaos::TransportShaper;
using kproxy::chaos::TransportToxic;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {
const kproxy::util::SteadyClock steady;

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
        &loop, steady, [&](kproxy::codec::Bytes b) { rec.writes.emplace_back(b.begin(), b.end()); }, [&] { ++rec.flushes; });
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
        &loop, steady,
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

TEST_CASE("the bandwidth limit spreads bytes at the configured rate (a manual clock: each piece at its exact time)") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  kproxy::testing::ManualClock clock;
  Recorder rec;
  {
    std::vector<Clock::duration> written;  // when each piece was written, from the first send
    const auto t0 = clock.now();
    TransportShaper shaper(
        &loop, clock,
        [&](kproxy::codec::Bytes b) {
          rec.writes.emplace_back(b.begin(), b.end());
          written.push_back(clock.now() - t0);
        },
        [&] { ++rec.flushes; });
    TransportToxic bw;
    bw.bytes_per_second = 10000;  // 200-byte pieces, each 20 ms on the wire
    std::string payload(2000, 'x');
    shaper.send(bytes_of(payload), &bw);
    CHECK(rec.writes.size() == 1);  // the first piece leaves at once
    CHECK(shaper.queued_bytes() == 1800);
    clock.advance(19ms);
    shaper.pump();
    CHECK(rec.writes.size() == 1);  // the first piece is still on the wire
    clock.advance(1ms);
    shaper.pump();
    CHECK(rec.writes.size() == 2);
    for (int i = 0; i < 8; ++i) {
      clock.advance(20ms);
      shaper.pump();
    }
    CHECK(rec.all() == payload);
    REQUIRE(written.size() == 10);
    for (size_t i = 0; i < written.size(); ++i) CHECK(written[i] == 20ms * static_cast<int>(i));
    CHECK(shaper.idle());
    // The link stays busy: a send at 180 ms waits for the last piece's time on the wire (200 ms).
    shaper.send(bytes_of(std::string(200, 'y')), &bw);
    CHECK(written.size() == 10);
    clock.advance(20ms);
    shaper.pump();
    REQUIRE(written.size() == 11);
    CHECK(written[10] == 200ms);
    // Once the link has been idle, a send goes at once.
    clock.advance(100ms);
    shaper.send(bytes_of(std::string(100, 'z')), &bw);
    REQUIRE(written.size() == 12);
    CHECK(written[11] == 300ms);
    CHECK(rec.flushes == 0);  // bandwidth pieces are plain writes; the caller flushes
  }
  close_loop(&loop);
}

TEST_CASE("the bandwidth limit holds on the loop's real timer too") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Recorder rec;
  {
    TransportShaper shaper(
        &loop, steady, [&](kproxy::codec::Bytes b) { rec.writes.emplace_back(b.begin(), b.end()); }, [&] { ++rec.flushes; });
    TransportToxic bw;
    bw.bytes_per_second = 10000;
    std::string payload(2000, 'x');
    auto t0 = Clock::now();
    shaper.send(bytes_of(payload), &bw);
    run_until_idle(&loop, shaper);
    auto took = Clock::now() - t0;
    CHECK(rec.all() == payload);
    CHECK(rec.writes.size() == 10);
    CHECK(took >= std::chrono::milliseconds(180));  // the last piece starts 9 x 20 ms after the first
  }
  close_loop(&loop);
}

TEST_CASE("shutdown drops what is queued and writes nothing more") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Recorder rec;
  {
    TransportShaper shaper(
        &loop, steady, [&](kproxy::codec::Bytes b) { rec.writes.emplace_back(b.begin(), b.end()); }, [&] { ++rec.flushes; });
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
        &loop, steady, [&](kproxy::codec::Bytes b) { rec.writes.emplace_back(b.begin(), b.end()); },
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
