#include "proxy/runtime/memory_return.h"

#include <cstdlib>

#include <doctest/doctest.h>

using kproxy::runtime::IdleTrimPolicy;

TEST_CASE("IdleTrimPolicy: the last connection closing asks for one trim") {
  IdleTrimPolicy p(4);
  CHECK_FALSE(p.on_close(2, 0));
  CHECK_FALSE(p.on_close(1, 0));
  CHECK(p.on_close(0, 0));
  CHECK(p.scheduled());
  p.trimmed();
  CHECK_FALSE(p.scheduled());
  CHECK(p.on_close(0, 5000));
}

TEST_CASE("IdleTrimPolicy: a burst of closes on a busy worker asks for a trim") {
  IdleTrimPolicy p(4);
  CHECK_FALSE(p.on_close(100, 0));
  CHECK_FALSE(p.on_close(99, 0));
  CHECK_FALSE(p.on_close(98, 0));
  CHECK(p.on_close(97, 0));  // the 4th close since the last trim
  p.trimmed();
  CHECK_FALSE(p.on_close(96, 0));  // counted again from the trim
}

TEST_CASE("IdleTrimPolicy: a burst of opens asks for a trim; opens and closes count together") {
  IdleTrimPolicy p(4);
  CHECK_FALSE(p.on_open(0));
  CHECK_FALSE(p.on_open(0));
  CHECK_FALSE(p.on_open(0));
  CHECK(p.on_open(0));  // the 4th open: a burst of handshakes left holes between the live sessions
  p.trimmed();
  CHECK_FALSE(p.on_open(10));
  CHECK_FALSE(p.on_close(10, 10));
  CHECK_FALSE(p.on_open(10));
  CHECK(p.on_close(10, 10));  // 2 opens + 2 closes
  p.trimmed();
  CHECK_FALSE(p.on_handshake(20));
  CHECK_FALSE(p.on_open(20));
  CHECK_FALSE(p.on_handshake(20));
  CHECK(p.on_handshake(20));   // handshakes count too: each freed its record buffers
  CHECK(p.on_handshake(900));  // and postpone the trim while they go on
}

TEST_CASE("IdleTrimPolicy: a burst postpones its trim until it is over, at most kTrimLongestWait") {
  using kproxy::runtime::kTrimLongestWait;
  const auto longest = static_cast<uint64_t>(kTrimLongestWait.count());
  IdleTrimPolicy p(2);
  CHECK_FALSE(p.on_open(1000));
  CHECK(p.on_open(1000));      // asked for at 1000 ms
  CHECK(p.on_open(1500));      // still opening: restart the timer
  CHECK(p.on_close(3, 2000));  // closes postpone it too
  CHECK(p.on_open(1000 + longest - 1));
  CHECK_FALSE(p.on_open(1000 + longest));  // waited long enough: the timer runs out as it is
  CHECK(p.scheduled());
  p.trimmed();
  CHECK_FALSE(p.on_open(1000 + longest + 1));  // a new count
}

TEST_CASE("configure_allocator and trim_free_memory run in any allocator") {
  // glibc: both take effect; a sanitizer's allocator ignores them. Either way no crash, and
  // memory freed before a trim stays usable after it.
  (void)kproxy::runtime::configure_allocator();
  void* big = std::malloc(8 << 20);
  REQUIRE(big != nullptr);
  std::free(big);
  (void)kproxy::runtime::trim_free_memory();
  void* again = std::malloc(1 << 20);
  CHECK(again != nullptr);
  std::free(again);
}
