#include "proxy/net/deadline_timer.h"

#include <memory>

#include <doctest/doctest.h>

#include "tests/unit/support/manual_clock.h"

using kproxy::net::DeadlineTimer;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {
const kproxy::util::SteadyClock steady;

struct Loop {
  uv_loop_t loop;
  Loop() { uv_loop_init(&loop); }
  ~Loop() {
    uv_run(&loop, UV_RUN_DEFAULT);  // runs pending close callbacks
    CHECK(uv_loop_close(&loop) == 0);
  }
};
}  // namespace

TEST_CASE("DeadlineTimer fires once, not before its deadline, and holds no handle until armed") {
  Loop l;
  int fired = 0;
  Clock::time_point fired_at{};
  DeadlineTimer timer(&l.loop, steady, [&] {
    ++fired;
    fired_at = Clock::now();
  });
  CHECK(!timer.allocated());
  auto at = Clock::now() + milliseconds(20);
  timer.arm(at);
  CHECK(timer.allocated());
  uv_run(&l.loop, UV_RUN_DEFAULT);  // returns once the one-shot timer has fired
  CHECK(fired == 1);
  CHECK(fired_at >= at);
  timer.cancel();
  CHECK(!timer.allocated());
}

TEST_CASE("DeadlineTimer: arming again replaces the earlier deadline") {
  Loop l;
  int fired = 0;
  DeadlineTimer timer(&l.loop, steady, [&] { ++fired; });
  auto start = Clock::now();
  timer.arm(start + std::chrono::seconds(30));
  timer.arm(start + milliseconds(5));
  uv_run(&l.loop, UV_RUN_DEFAULT);
  CHECK(fired == 1);
  CHECK(Clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("DeadlineTimer: a deadline already past fires at the next loop turn") {
  Loop l;
  int fired = 0;
  DeadlineTimer timer(&l.loop, steady, [&] { ++fired; });
  timer.arm(Clock::now() - milliseconds(100));
  CHECK(fired == 0);  // never from inside arm()
  uv_run(&l.loop, UV_RUN_DEFAULT);
  CHECK(fired == 1);
}

TEST_CASE("DeadlineTimer: cancel and destruction stop a pending deadline, and the handle is freed") {
  Loop l;
  int fired = 0;
  DeadlineTimer cancelled(&l.loop, steady, [&] { ++fired; });
  cancelled.arm(Clock::now() + milliseconds(1));
  cancelled.cancel();
  {
    DeadlineTimer destroyed(&l.loop, steady, [&] { ++fired; });
    destroyed.arm(Clock::now() + milliseconds(1));
  }
  uv_run(&l.loop, UV_RUN_DEFAULT);  // only the close callbacks run; LSan checks they free
  CHECK(fired == 0);
  // A cancelled timer can be armed again.
  cancelled.arm(Clock::now());
  uv_run(&l.loop, UV_RUN_DEFAULT);
  CHECK(fired == 1);
}

TEST_CASE("DeadlineTimer: the callback may destroy the timer's owner, or re-arm it") {
  Loop l;
  struct Owner {
    DeadlineTimer timer;
    explicit Owner(uv_loop_t* loop, std::unique_ptr<Owner>& self) : timer(loop, steady, [&self] { self.reset(); }) {}
  };
  std::unique_ptr<Owner> owner;
  owner = std::make_unique<Owner>(&l.loop, owner);
  owner->timer.arm(Clock::now());
  uv_run(&l.loop, UV_RUN_DEFAULT);  // ASan reports a use after free if the timer touches itself after
  CHECK(owner == nullptr);

  int fired = 0;
  DeadlineTimer again(&l.loop, steady, [&] {
    if (++fired < 3) again.arm(Clock::now());
  });
  again.arm(Clock::now());
  uv_run(&l.loop, UV_RUN_DEFAULT);
  CHECK(fired == 3);
}

TEST_CASE("DeadlineTimer: a deadline is read on the timer's clock, not the machine's") {
  Loop l;
  kproxy::testing::ManualClock clock;
  int fired = 0;
  DeadlineTimer timer(&l.loop, clock, [&] { ++fired; });
  auto at = clock.now() + std::chrono::hours(1);
  clock.advance(std::chrono::hours(2));  // an hour past the deadline on the timer's clock
  auto start = Clock::now();
  timer.arm(at);
  uv_run(&l.loop, UV_RUN_DEFAULT);
  CHECK(fired == 1);
  CHECK(Clock::now() - start < std::chrono::seconds(10));  // not an hour of real time

  auto armed = Clock::now();
  timer.arm(clock.now() + milliseconds(30));  // 30 ms ahead on the timer's clock: 30 ms of waiting
  uv_run(&l.loop, UV_RUN_DEFAULT);
  CHECK(fired == 2);
  CHECK(Clock::now() - armed >= milliseconds(30));
}

TEST_CASE("DeadlineTimer: arm_after waits the given time, whatever the clock says") {
  Loop l;
  kproxy::testing::ManualClock clock;
  int fired = 0;
  DeadlineTimer timer(&l.loop, clock, [&] { ++fired; });
  auto start = Clock::now();
  timer.arm_after(milliseconds(25));
  timer.arm_after(milliseconds(20));  // replaces the first
  uv_run(&l.loop, UV_RUN_DEFAULT);
  CHECK(fired == 1);
  CHECK(Clock::now() - start >= milliseconds(20));
  timer.arm_after(milliseconds(-5));  // past: the next loop turn
  uv_run(&l.loop, UV_RUN_DEFAULT);
  CHECK(fired == 2);
}

TEST_CASE("loop_wait_ms: never shorter than the wait, even on a loop clock 2 ms behind") {
  using kproxy::net::loop_wait_ms;
  using std::chrono::microseconds;
  CHECK(loop_wait_ms(milliseconds(-5)) == 0);
  CHECK(loop_wait_ms(milliseconds(0)) == 0);
  CHECK(loop_wait_ms(microseconds(1)) == 3);
  CHECK(loop_wait_ms(microseconds(999)) == 3);
  CHECK(loop_wait_ms(milliseconds(30)) == 32);
  CHECK(loop_wait_ms(microseconds(30'001)) == 33);
}
