// libuv loops in unit tests: every test closes its loop, and with it every handle it made.
#pragma once

#include <doctest/doctest.h>
#include <uv.h>

namespace kproxy::testing {

/// Runs `loop` until its handles are closed (close callbacks included) and closes it; fails the
/// test when a handle is left open.
inline void close_loop(uv_loop_t* loop) {
  uv_run(loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(loop) == 0);
}

}  // namespace kproxy::testing
