#include "proxy/metrics/topic_names.h"

#include <doctest/doctest.h>

using namespace kproxy;

namespace {
codec::Uuid id(uint8_t n) {
  codec::Uuid u{};
  u[15] = n;
  u[0] = 1;
  return u;
}
}  // namespace

TEST_CASE("topic names: learnt ids resolve, renames replace, the zero id is ignored") {
  metrics::TopicNames names;
  names.learn(id(1), "orders");
  names.learn(id(2), "payments");
  names.learn(codec::Uuid{}, "ignored");
  names.learn(id(3), "");
  CHECK(names.name(id(1)) == "orders");
  CHECK(names.name(id(2)) == "payments");
  CHECK_FALSE(names.name(codec::Uuid{}));
  CHECK_FALSE(names.name(id(3)));
  names.learn(id(1), "orders-v2");  // a topic recreated under the same id cannot happen, but a rename must win
  CHECK(names.name(id(1)) == "orders-v2");
  CHECK(names.size() == 2);
}

TEST_CASE("topic names: bounded, the oldest are forgotten first") {
  metrics::TopicNames names(10);
  for (uint8_t i = 1; i <= 11; ++i) names.learn(id(i), "t" + std::to_string(i));
  CHECK(names.size() <= 10);
  CHECK_FALSE(names.name(id(1)));
  CHECK(names.name(id(11)) == "t11");
}
