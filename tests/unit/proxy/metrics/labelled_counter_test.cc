// Tests for proxy/metrics/labelled_counter.h.
#include "proxy/metrics/labelled_counter.h"

#include <thread>
#include <vector>

#include <doctest/doctest.h>

using kproxy::metrics::LabelledCounter;

TEST_CASE("LabelledCounter: one series per value, every series even at 0, any thread may count") {
  LabelledCounter c("kproxy_test_total", "help text", "reason", {"a", "b"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) c.add(1);
    });
  for (auto& t : threads) t.join();
  CHECK(c.value(0) == 0);
  CHECK(c.value(1) == 4000);
  CHECK(c.value(2) == 0);  // no such value
  auto f = c.family();
  CHECK(f.name == "kproxy_test_total");
  CHECK(f.type == prometheus::MetricType::Counter);
  REQUIRE(f.metric.size() == 2);
  CHECK(f.metric[0].label.at(0).name == "reason");
  CHECK(f.metric[0].label.at(0).value == "a");
  CHECK(f.metric[1].counter.value == 4000);
}

TEST_CASE("LabelledCounter: no label, one series") {
  LabelledCounter c("kproxy_test_dropped_total", "help", "", {});
  c.add(0, 5);
  auto f = c.family();
  REQUIRE(f.metric.size() == 1);
  CHECK(f.metric[0].label.empty());
  CHECK(f.metric[0].counter.value == 5);
}

TEST_CASE("LabelledCounter: add(i, n) counts n in that series only; the family keeps the value order and the help") {
  LabelledCounter c("kproxy_test_refusals_total", "Refusals by status.", "status", {"400", "401", "413"});
  auto before = c.family();
  REQUIRE(before.metric.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(before.metric[i].counter.value == 0);  // every series from the start
  c.add(2, 7);
  c.add(0);
  c.add(3, 100);  // past the list: ignored
  c.add(size_t(-1), 100);
  CHECK(c.value(0) == 1);
  CHECK(c.value(1) == 0);
  CHECK(c.value(2) == 7);
  CHECK(c.value(3) == 0);
  CHECK(c.name() == "kproxy_test_refusals_total");
  auto f = c.family();
  CHECK(f.help == "Refusals by status.");
  REQUIRE(f.metric.size() == 3);
  const char* values[] = {"400", "401", "413"};
  const double counts[] = {1, 0, 7};
  for (size_t i = 0; i < 3; ++i) {
    REQUIRE(f.metric[i].label.size() == 1);
    CHECK(f.metric[i].label[0].name == "status");
    CHECK(f.metric[i].label[0].value == values[i]);
    CHECK(f.metric[i].counter.value == counts[i]);
  }
}

TEST_CASE("LabelledCounter: with no label the values given are ignored, one unlabelled series") {
  LabelledCounter c("kproxy_test_single_total", "help", "", {"a", "b", "c"});
  c.add(0, 2);
  c.add(1, 5);  // there is no second series
  CHECK(c.value(0) == 2);
  CHECK(c.value(1) == 0);
  auto f = c.family();
  REQUIRE(f.metric.size() == 1);
  CHECK(f.metric[0].label.empty());
  CHECK(f.metric[0].counter.value == 2);
}
