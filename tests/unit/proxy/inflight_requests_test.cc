#include "proxy/inflight_requests.h"

#include <doctest/doctest.h>

using kproxy::proxy::InflightRequest;
using kproxy::proxy::InflightRequests;

TEST_CASE("first in, first out, and nothing kept when idle") {
  InflightRequests q;
  CHECK(q.empty());
  for (int i = 0; i < 1000; ++i) {
    InflightRequest r;
    r.correlation_id = i;
    q.push(r);
  }
  CHECK(q.size() == 1000);
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(q.front().correlation_id == i);
    CHECK(q.pop().correlation_id == i);
  }
  CHECK(q.empty());
  // Interleaved push/pop keeps order.
  int next_in = 0, next_out = 0;
  for (int round = 0; round < 100; ++round) {
    for (int k = 0; k < 3; ++k) {
      InflightRequest r;
      r.correlation_id = next_in++;
      q.push(r);
    }
    for (int k = 0; k < 2; ++k) CHECK(q.pop().correlation_id == next_out++);
  }
  while (!q.empty()) CHECK(q.pop().correlation_id == next_out++);
  CHECK(next_out == next_in);
}
