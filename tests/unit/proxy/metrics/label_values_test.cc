#include "proxy/metrics/label_values.h"

#include <thread>
#include <vector>

#include <doctest/doctest.h>

using namespace kproxy::metrics;

namespace {
bool has_sample(const prometheus::MetricFamily& f, const std::string& api, const std::string& value, double n) {
  for (const auto& m : f.metric) {
    if (m.label.size() == 2 && m.label[0].value == api && m.label[1].value == value && m.counter.value == n) return true;
  }
  return false;
}
}  // namespace

TEST_CASE("label values: the first max_values values get a series, later ones fold into other") {
  LabelValues topics("kproxy_topic_requests_total", "help", "topic", 2);
  topics.count(0, "orders");
  topics.count(0, "orders");
  topics.count(1, "orders");
  topics.count(0, "payments");
  topics.count(0, "audit");  // third distinct value: folded
  topics.count(1, "audit");
  topics.count(0, "refunds");   // folded too
  topics.count(0, "payments");  // known values keep counting
  CHECK(topics.count_of("orders", 0) == 2);
  CHECK(topics.count_of("orders", 1) == 1);
  CHECK(topics.count_of("payments", 0) == 2);
  CHECK(topics.count_of("audit", 0) == 0);
  CHECK(topics.count_of("other", 0) == 2);
  CHECK(topics.count_of("other", 1) == 1);
  CHECK(topics.folded() == 3);
  auto f = topics.collect();
  CHECK(f.name == "kproxy_topic_requests_total");
  CHECK(f.type == prometheus::MetricType::Counter);
  CHECK(has_sample(f, "Produce", "orders", 2));
  CHECK(has_sample(f, "Fetch", "orders", 1));
  CHECK(has_sample(f, "Produce", "payments", 2));
  CHECK(has_sample(f, "Produce", "other", 2));
  CHECK(f.metric.size() == 5);  // Produce/Fetch orders, Produce payments, Produce/Fetch other
}

TEST_CASE("label values: a value named other shares the folded series without counting as folded") {
  LabelValues ids("kproxy_client_requests_total", "help", "client_id", 5);
  ids.count(3, "other");
  CHECK(ids.count_of("other", 3) == 1);
  CHECK(ids.folded() == 0);
}

TEST_CASE("label values: threads racing for the last slots never exceed the cap and lose no count") {
  LabelValues ids("kproxy_client_requests_total", "help", "client_id", 10);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&ids, t] {
      for (int i = 0; i < 2000; ++i) ids.count(0, "client-" + std::to_string((i * 7 + t) % 40));
    });
  }
  for (auto& t : threads) t.join();
  auto f = ids.collect();
  double sum = 0;
  size_t own = 0;
  for (const auto& m : f.metric) {
    sum += m.counter.value;
    own += m.label[1].value == "other" ? 0 : 1;
  }
  CHECK(sum == 8000);
  CHECK(own == 10);
  CHECK(ids.folded() == static_cast<uint64_t>(ids.count_of("other", 0)));
  CHECK(ids.folded() > 0);
}
