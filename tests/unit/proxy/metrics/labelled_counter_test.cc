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
