// FaultShaper: the fault stage's byte shaper. Bytes pass straight through until an exchange's
// shape asks for something; reset_after_bytes counts from that exchange's first byte and resets
// the connection at the budget; transport toxics queue bytes (counted for backpressure); a spec
// that is not the fault stage's is ignored.
#include "proxy/chaos/fault_shaper.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <uv.h>

#include "tests/unit/support/loop.h"

using namespace kproxy;

namespace {

/// A ShapedSink that keeps what reaches it.
struct RecordingSink final : stage::ShapedSink {
  std::string written;
  int flushes = 0;
  std::optional<net::CloseReason> closed;
  bool reset = false;
  void write(codec::Bytes b) override { written.append(b.begin(), b.end()); }
  void flush() override { ++flushes; }
  void close(net::CloseReason reason, bool with_reset) override {
    closed = std::move(reason);
    reset = with_reset;
  }
};

codec::Bytes bytes_of(const std::string& s) { return codec::Bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

struct OtherSpec final : stage::ShapeSpec {};

/// A loop, a recording sink and a shaper writing to it; the loop is closed (every handle with it)
/// when the test case ends.
struct Shaping {
  uv_loop_t loop;
  RecordingSink sink;
  std::optional<chaos::FaultShaper> shaper;
  Shaping() {
    uv_loop_init(&loop);
    shaper.emplace(&loop, util::steady_clock(), sink);
  }
  ~Shaping() {
    shaper.reset();
    kproxy::testing::close_loop(&loop);
  }
};

}  // namespace

TEST_CASE_FIXTURE(Shaping, "fault shaper: bytes without a shape pass at once, unflushed") {
  shaper->send(bytes_of("abc"), nullptr);
  shaper->send(bytes_of("de"), nullptr);
  CHECK(sink.written == "abcde");
  CHECK(sink.flushes == 0);  // the pipeline flushes, as for a plain write
  CHECK(shaper->queued_bytes() == 0);
  CHECK_FALSE(shaper->reset_budget());
}

TEST_CASE_FIXTURE(Shaping, "fault shaper: reset_after_bytes counts from its exchange's first byte, then resets and sends nothing more") {
  shaper->send(bytes_of("before"), nullptr);  // an earlier exchange: not counted
  chaos::FaultShape shape;
  shape.reset_after_bytes = 7;
  shape.reset_rule = "rst";
  shaper->send(bytes_of("0123"), &shape);
  REQUIRE(shaper->reset_budget());
  CHECK(*shaper->reset_budget() == 3);
  CHECK_FALSE(sink.closed);
  shaper->send(bytes_of("45678"), nullptr);  // a later exchange's bytes count too
  CHECK(sink.written == "before0123456");
  REQUIRE(sink.closed);
  CHECK(sink.reset);
  CHECK(sink.closed->category == net::CloseCategory::kFault);
  CHECK(sink.closed->detail.find("fault rule 'rst'") != std::string::npos);
  shaper->send(bytes_of("late"), nullptr);
  CHECK(sink.written == "before0123456");
}

TEST_CASE_FIXTURE(Shaping, "fault shaper: a reset of 0 bytes resets at the exchange's first byte") {
  chaos::FaultShape shape;
  shape.reset_after_bytes = 0;
  shaper->send(bytes_of("xyz"), &shape);
  CHECK(sink.written.empty());
  REQUIRE(sink.closed);
  CHECK(sink.reset);
  CHECK(sink.flushes == 1);  // what left before the reset is handed to the kernel first
}

TEST_CASE_FIXTURE(Shaping, "fault shaper: a slice queues the exchange's bytes in pieces, later bytes wait behind them") {
  chaos::FaultShape shape;
  shape.toxic.emplace();
  shape.toxic->slice_bytes = 2;
  shape.toxic->slice_delay = std::chrono::milliseconds(1);
  shaper->send(bytes_of("abcdef"), &shape);
  CHECK(sink.written == "ab");  // the first piece is due now
  CHECK(shaper->queued_bytes() == 4);
  shaper->send(bytes_of("g"), nullptr);  // behind the queued pieces: order holds
  CHECK(shaper->queued_bytes() == 5);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (sink.written.size() < 7 && std::chrono::steady_clock::now() < deadline) uv_run(&loop, UV_RUN_ONCE);
  CHECK(sink.written == "abcdefg");
  CHECK(shaper->queued_bytes() == 0);
  CHECK(sink.flushes >= 3);  // each slice is its own write
  shaper->shutdown();
}

TEST_CASE_FIXTURE(Shaping, "fault shaper: another stage's spec is not read; shutdown drops what is queued") {
  OtherSpec other;
  shaper->send(bytes_of("plain"), &other);
  CHECK(sink.written == "plain");
  chaos::FaultShape slow;
  slow.toxic.emplace();
  slow.toxic->bytes_per_second = 100;  // 2-byte pieces, 20 ms apart
  shaper->send(bytes_of("0123456789"), &slow);
  CHECK(shaper->queued_bytes() > 0);
  shaper->shutdown();
  CHECK(shaper->queued_bytes() == 0);
  size_t written = sink.written.size();
  shaper->send(bytes_of("more"), nullptr);
  CHECK(sink.written.size() == written);
}
