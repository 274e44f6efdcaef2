#include "proxy/net/uv_handle.h"

#include <doctest/doctest.h>

#include <csignal>
#include <memory>
#include <string>

using kproxy::net::UvHandle;

namespace {

/// Every handle must be closed by its owner: the loop then ends and closes cleanly, and
/// LeakSanitizer (the unit tests run under ASan) reports any handle memory not freed.
void run_until_closed(uv_loop_t* loop) {
  uv_run(loop, UV_RUN_DEFAULT);
  int open_handles = 0;
  uv_walk(
      loop, [](uv_handle_t*, void* n) { ++*static_cast<int*>(n); }, &open_handles);
  CHECK(open_handles == 0);
  CHECK(uv_loop_close(loop) == 0);
}

struct Owner {
  int closed = 0;
  static void on_closed(void* self) { ++static_cast<Owner*>(self)->closed; }
};

template <typename T, typename Init, typename... Args>
void check_close_paths(Init init, Args... args) {
  SUBCASE("close() calls back once, after libuv is done, and frees the handle") {
    uv_loop_t loop;
    uv_loop_init(&loop);
    Owner owner;
    UvHandle<T> h;
    REQUIRE(h.init(&loop, &owner, init, args...) == 0);
    CHECK(h.open());
    CHECK(h.get()->data == &owner);
    h.close(Owner::on_closed);
    h.close(Owner::on_closed);  // a second close does nothing
    CHECK(h.closing());
    CHECK(owner.closed == 0);  // not before libuv's close callback
    run_until_closed(&loop);
    CHECK(owner.closed == 1);
    CHECK(h.get() == nullptr);
    CHECK_FALSE(h.open());
  }
  SUBCASE("destroying the owner first closes the handle without calling back") {
    uv_loop_t loop;
    uv_loop_init(&loop);
    auto owner = std::make_unique<Owner>();
    auto h = std::make_unique<UvHandle<T>>();
    REQUIRE(h->init(&loop, owner.get(), init, args...) == 0);
    h->close(Owner::on_closed);
    h.reset();      // the UvHandle goes while libuv still closes its handle
    owner.reset();  // and so does its owner: the close callback must not reach it
    run_until_closed(&loop);
  }
  SUBCASE("a handle never closed by hand is closed by the destructor") {
    uv_loop_t loop;
    uv_loop_init(&loop);
    Owner owner;
    {
      UvHandle<T> h;
      REQUIRE(h.init(&loop, &owner, init, args...) == 0);
    }
    run_until_closed(&loop);
    CHECK(owner.closed == 0);
  }
  SUBCASE("reset() lets go, and init() may run again") {
    uv_loop_t loop;
    uv_loop_init(&loop);
    Owner owner;
    UvHandle<T> h;
    REQUIRE(h.init(&loop, &owner, init, args...) == 0);
    h.reset();
    CHECK(h.get() == nullptr);
    REQUIRE(h.init(&loop, &owner, init, args...) == 0);
    h.close(Owner::on_closed);
    run_until_closed(&loop);
    CHECK(owner.closed == 1);
  }
}

void on_async(uv_async_t*) {}

}  // namespace

TEST_CASE("UvHandle<uv_tcp_t> closes on every path") { check_close_paths<uv_tcp_t>(uv_tcp_init); }
TEST_CASE("UvHandle<uv_timer_t> closes on every path") { check_close_paths<uv_timer_t>(uv_timer_init); }
TEST_CASE("UvHandle<uv_async_t> closes on every path") { check_close_paths<uv_async_t>(uv_async_init, on_async); }
TEST_CASE("UvHandle<uv_signal_t> closes on every path") { check_close_paths<uv_signal_t>(uv_signal_init); }

TEST_CASE("a failed init allocates nothing and leaves the UvHandle empty") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  UvHandle<uv_tcp_t> h;
  CHECK(h.init(&loop, nullptr, uv_tcp_init_ex, 0xffffu) < 0);  // not a valid address family
  CHECK(h.get() == nullptr);
  CHECK_FALSE(h.open());
  h.close();  // nothing to close
  run_until_closed(&loop);
}

TEST_CASE("a timer that fires after its owner cancelled never reaches the owner") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct Fired {
    int count = 0;
  } fired;
  UvHandle<uv_timer_t> t;
  REQUIRE(t.init(&loop, &fired, uv_timer_init) == 0);
  uv_timer_start(
      t.get(),
      [](uv_timer_t* h) {
        REQUIRE(h->data != nullptr);
        ++static_cast<Fired*>(h->data)->count;
      },
      0, 0);
  uv_run(&loop, UV_RUN_NOWAIT);
  CHECK(fired.count == 1);
  uv_timer_start(
      t.get(), [](uv_timer_t* h) { ++static_cast<Fired*>(h->data)->count; }, 0, 0);
  t.reset();  // closing stops the timer: no second fire
  run_until_closed(&loop);
  CHECK(fired.count == 1);
}

TEST_CASE("a signal handle stops receiving once closed") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct Seen {
    int count = 0;
  } seen;
  UvHandle<uv_signal_t> s;
  REQUIRE(s.init(&loop, &seen, uv_signal_init) == 0);
  REQUIRE(uv_signal_start(
              s.get(),
              [](uv_signal_t* h, int) {
                ++static_cast<Seen*>(h->data)->count;
                uv_signal_stop(h);
              },
              SIGUSR2) == 0);
  std::raise(SIGUSR2);
  uv_run(&loop, UV_RUN_ONCE);
  CHECK(seen.count == 1);
  s.close();
  run_until_closed(&loop);
  CHECK(seen.count == 1);
}
