// or_no_observer: what a stage keeps instead of a nullable observer pointer.
#include "proxy/stage/frame_observer.h"

#include <chrono>
#include <memory>
#include <vector>

#include <doctest/doctest.h>

#include "codec/generated/messages.h"
#include "codec/request_header.h"
#include "tests/unit/support/frames.h"

using namespace kproxy;

namespace {

struct Counting final : stage::FrameObserver {
  int requests = 0, responses = 0, closed = 0;
  void on_request(const stage::RequestContext&) override { ++requests; }
  void on_response(const stage::ResponseContext&, std::chrono::nanoseconds) override { ++responses; }
  void on_connection_closed(uint64_t) override { ++closed; }
};

}  // namespace

TEST_CASE("or_no_observer: a given observer is kept as it is and sees the frames") {
  auto counting = std::make_shared<Counting>();
  std::shared_ptr<stage::FrameObserver> kept = stage::or_no_observer(counting);
  CHECK(kept.get() == counting.get());
  CHECK(counting.use_count() == 2);  // shared, not copied

  stage::ConnectionInfo info{1, "l", 0, nullptr, {}};
  codec::MetadataRequest body;
  codec::RequestHeader header;
  auto frame = kproxy::testing::encoded_request_frame(body, 4, 1, "c", header);
  stage::RequestContext ctx(header, codec::Bytes(frame), info);
  kept->on_request(ctx);
  kept->on_connection_closed(1);
  CHECK(counting->requests == 1);
  CHECK(counting->closed == 1);
}

TEST_CASE("or_no_observer: null becomes a do-nothing observer, never null") {
  std::shared_ptr<stage::FrameObserver> nothing = stage::or_no_observer(nullptr);
  REQUIRE(nothing != nullptr);
  // Every hook can be called and does nothing (no frame is decoded for it either).
  stage::ConnectionInfo info{1, "l", 0, nullptr, {}};
  std::vector<uint8_t> garbage = {0, 0, 0, 2, 0xff, 0xff};
  stage::ResponseContext ctx(3, 12, 1, codec::Bytes(garbage), info);
  nothing->on_response(ctx, std::chrono::nanoseconds(5));
  nothing->on_response_withheld(1, 2);
  nothing->on_connection_closed(1);
  CHECK(ctx.decode_failure() == stage::DecodeFailure::kNone);  // never asked to decode
  CHECK(ctx.changed_by() == 0u);
}

TEST_CASE("or_no_observer: every null gets the one shared do-nothing observer") {
  auto a = stage::or_no_observer(nullptr);
  auto b = stage::or_no_observer(std::shared_ptr<stage::FrameObserver>());
  CHECK(a.get() == b.get());
  auto counting = std::make_shared<Counting>();
  CHECK(stage::or_no_observer(counting).get() != a.get());
}
