#include "proxy/util/ring_queue.h"

#include <memory>
#include <string>

#include <doctest/doctest.h>

using kproxy::util::RingQueue;

TEST_CASE("RingQueue allocates on the first push_back, keeps FIFO order and releases when empty") {
  RingQueue<std::string> q;
  CHECK(q.empty());
  CHECK(q.capacity() == 0);
  q.push_back("a");
  q.push_back("b");
  q.push_back("c");
  CHECK(q.capacity() == 8);
  CHECK(q.size() == 3);
  CHECK(q.front() == "a");
  CHECK(q.back() == "c");
  CHECK(q[1] == "b");
  q.pop_front();
  CHECK(q.front() == "b");
  q.release_if_empty();  // not empty: kept
  CHECK(q.capacity() == 8);
  q.pop_front();
  q.pop_front();
  CHECK(q.empty());
  CHECK(q.capacity() == 8);  // pop_front keeps the array for the next push
  q.release_if_empty();
  CHECK(q.capacity() == 0);
  q.push_back("d");
  CHECK(q.front() == "d");
  q.clear();
  CHECK(q.empty());
  CHECK(q.capacity() == 0);
}

TEST_CASE("RingQueue keeps order across wrap-around and growth") {
  // Pops and pushes move the front around the ring; growing while wrapped must keep the order.
  RingQueue<std::unique_ptr<int>> q;
  int next_in = 0, next_out = 0;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 6; ++i) q.push_back(std::make_unique<int>(next_in++));
    for (int i = 0; i < 4; ++i) {
      REQUIRE(q.front());
      CHECK(*q.front() == next_out++);
      q.pop_front();
    }
  }
  CHECK(q.size() == 10);
  CHECK(q.capacity() == 16);
  for (size_t i = 0; i < q.size(); ++i) CHECK(*q[i] == next_out + static_cast<int>(i));
  while (!q.empty()) {
    CHECK(*q.front() == next_out++);
    q.pop_front();
  }
  CHECK(next_out == next_in);
}

TEST_CASE("RingQueue destroys what it still holds") {
  auto counted = std::make_shared<int>(0);
  {
    RingQueue<std::shared_ptr<int>> q;
    for (int i = 0; i < 20; ++i) q.push_back(std::shared_ptr<int>(counted));
    q.pop_front();
    CHECK(counted.use_count() == 20);
  }
  CHECK(counted.use_count() == 1);
}
