#include "proxy/util/intrusive_list.h"

#include <doctest/doctest.h>

using kproxy::util::IntrusiveList;
using kproxy::util::IntrusiveListHook;

namespace {
struct Item : IntrusiveListHook {
  explicit Item(int v = 0) : value(v) {}
  int value;
};
using List = IntrusiveList<Item>;
}  // namespace

TEST_CASE("IntrusiveList inserts, erases from any position and lists what is left") {
  Item a(1), b(2), c(3);
  List list;
  CHECK(list.empty());
  list.insert(&a);
  list.insert(&b);
  list.insert(&c);
  list.insert(&b);  // already in: nothing
  CHECK(list.size() == 3);
  CHECK(list.contains(&b));
  list.erase(&b);  // the middle
  CHECK_FALSE(list.contains(&b));
  CHECK(list.size() == 2);
  auto left = list.snapshot();
  REQUIRE(left.size() == 2);
  CHECK(left[0] == &c);  // newest first
  CHECK(left[1] == &a);
  list.erase(&b);  // not in: nothing
  list.erase(&c);  // the head
  list.erase(&a);  // the last one
  CHECK(list.empty());
  CHECK(list.snapshot().empty());
  list.insert(&a);  // erased items can come back
  CHECK(list.size() == 1);
  CHECK(list.snapshot().front() == &a);
}

TEST_CASE("IntrusiveList: erasing every element of a snapshot while walking it") {
  Item items[5];
  List list;
  for (auto& i : items) list.insert(&i);
  for (Item* i : list.snapshot()) list.erase(i);
  CHECK(list.empty());
  for (auto& i : items) CHECK_FALSE(list.contains(&i));
}
