#include "proxy/util/log_throttle.h"

#include <doctest/doctest.h>

#include <thread>

using kproxy::proxy::LogThrottle;
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

  LogThrottle slow(20ms);
  CHECK(slow.allow());
  CHECK_FALSE(slow.allow());
  CHECK_FALSE(slow.allow());
  auto until = std::chrono::steady_clock::now() + 200ms;
  bool logged = false;
  while (!logged && std::chrono::steady_clock::now() < until) {
    logged = slow.allow(&suppressed);
    if (!logged) std::this_thread::yield();
  }
  REQUIRE(logged);
  CHECK(suppressed >= 2);
}
