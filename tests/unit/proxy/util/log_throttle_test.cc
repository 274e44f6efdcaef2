#include "proxy/util/log_throttle.h"

#include <doctest/doctest.h>

#include "tests/unit/support/manual_clock.h"

using kproxy::util::LogThrottle;
using namespace std::chrono_literals;

TEST_CASE("log throttle: the first occurrence logs, the rest of the interval is counted") {
  LogThrottle throttle(1h);
  uint64_t suppressed = 99;
  CHECK(throttle.allow(&suppressed));
  CHECK(suppressed == 0);
  for (int i = 0; i < 5; ++i) CHECK_FALSE(throttle.allow());
}

TEST_CASE("log throttle: after the interval the next line logs and says how many were left out") {
  LogThrottle throttle(0ms);  // every call is past the interval
  uint64_t suppressed = 99;
  CHECK(throttle.allow(&suppressed));
  CHECK(suppressed == 0);
  CHECK(throttle.allow(&suppressed));
  CHECK(suppressed == 0);

  kproxy::testing::ManualClock clock;
  LogThrottle slow(20ms, clock);
  CHECK(slow.allow());
  CHECK_FALSE(slow.allow());
  CHECK_FALSE(slow.allow());
  clock.advance(19ms);
  CHECK_FALSE(slow.allow());  // still inside the interval: counted
  clock.advance(1ms);
  REQUIRE(slow.allow(&suppressed));
  CHECK(suppressed == 3);
  CHECK_FALSE(slow.allow());  // a new interval began with that line
  clock.advance(20ms);
  REQUIRE(slow.allow(&suppressed));
  CHECK(suppressed == 1);
}

TEST_CASE("log throttle: the suppressed note names the count, or nothing") {
  CHECK(LogThrottle::suppressed_note(0).empty());
  CHECK(LogThrottle::suppressed_note(4) == " (4 more since the last such line)");
}
