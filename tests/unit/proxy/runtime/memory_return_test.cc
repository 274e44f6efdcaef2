#include "proxy/runtime/memory_return.h"

#include <cstdlib>

#include <doctest/doctest.h>

using kproxy::proxy::IdleTrimPolicy;

TEST_CASE("IdleTrimPolicy: the last connection closing schedules one trim") {
  IdleTrimPolicy p(4);
  CHECK_FALSE(p.on_close(2));
  CHECK_FALSE(p.on_close(1));
  CHECK(p.on_close(0));
  CHECK(p.scheduled());
  CHECK_FALSE(p.on_close(0));  // one at a time: the scheduled one covers it
  p.trimmed();
  CHECK_FALSE(p.scheduled());
  CHECK(p.on_close(0));
}

TEST_CASE("IdleTrimPolicy: a burst of closes on a busy worker schedules a trim") {
  IdleTrimPolicy p(4);
  CHECK_FALSE(p.on_close(100));
  CHECK_FALSE(p.on_close(99));
  CHECK_FALSE(p.on_close(98));
  CHECK(p.on_close(97));  // the 4th close since the last trim
  p.trimmed();
  CHECK_FALSE(p.on_close(96));  // counted again from the trim
}

TEST_CASE("configure_allocator and trim_free_memory run in any allocator") {
  // glibc: both take effect; a sanitizer's allocator ignores them. Either way no crash, and
  // memory freed before a trim stays usable after it.
  (void)kproxy::proxy::configure_allocator();
  void* big = std::malloc(8 << 20);
  REQUIRE(big != nullptr);
  std::free(big);
  (void)kproxy::proxy::trim_free_memory();
  void* again = std::malloc(1 << 20);
  CHECK(again != nullptr);
  std::free(again);
}
