#include "proxy/util/lazy_deque.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

using kproxy::util::LazyDeque;

TEST_CASE("LazyDeque allocates on the first push_back and keeps FIFO order") {
  LazyDeque<std::string> q;
  CHECK(q.empty());
  CHECK(!q.allocated());
  CHECK(q.begin() == q.end());
  q.push_back("a");
  q.push_back("b");
  q.push_back("c");
  CHECK(q.allocated());
  CHECK(q.size() == 3);
  CHECK(q.front() == "a");
  CHECK(q.back() == "c");
  std::vector<std::string> seen(q.begin(), q.end());
  CHECK(seen == std::vector<std::string>{"a", "b", "c"});
  q.pop_front();
  CHECK(q.front() == "b");
  q.release_if_empty();  // not empty: kept
  CHECK(q.allocated());
  CHECK(q.size() == 2);
  q.pop_front();
  q.pop_front();
  CHECK(q.empty());
  CHECK(q.allocated());  // pop_front keeps the storage for the next push
  q.release_if_empty();
  CHECK(!q.allocated());
  q.push_back("d");
  CHECK(q.front() == "d");
  q.clear();
  CHECK(q.empty());
  CHECK(!q.allocated());
}

TEST_CASE("an empty LazyDeque is one pointer") {
  CHECK(sizeof(LazyDeque<std::string>) == sizeof(void*));
  CHECK(sizeof(LazyDeque<std::string>) < sizeof(std::deque<std::string>));
}
