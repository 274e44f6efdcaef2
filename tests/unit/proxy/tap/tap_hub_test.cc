#include "proxy/tap/tap_hub.h"

#include <thread>

#include <doctest/doctest.h>

using namespace kproxy::tap;
using namespace std::chrono_literals;

TEST_CASE("tap: filters parse from the query and match events") {
  TapFilter f;
  CHECK(parse_filter({{"api", "Produce"}, {"direction", "response"}, {"errors", "true"}}, f) == "");
  CHECK(f.api_key == 0);
  CHECK(f.response == true);
  CHECK(f.errors_only);
  TapEventMeta meta{0, true, 7, "app", true};
  CHECK(f.matches(meta));
  meta.has_error = false;
  CHECK_FALSE(f.matches(meta));
  TapFilter g;
  CHECK(parse_filter({{"api", "3"}, {"client_id", "app"}, {"connection", "7"}}, g) == "");
  CHECK(g.matches(TapEventMeta{3, false, 7, "app", false}));
  CHECK_FALSE(g.matches(TapEventMeta{3, false, 8, "app", false}));
  CHECK_FALSE(g.matches(TapEventMeta{3, false, 7, "other", false}));
  TapFilter bad;
  CHECK(parse_filter({{"api", "NoSuchApi"}}, bad) != "");
  CHECK(parse_filter({{"connection", "x"}}, bad) != "");
  CHECK(parse_filter({{"direction", "sideways"}}, bad) != "");
  CHECK(parse_filter({{"color", "red"}}, bad) != "");
}

TEST_CASE("tap: no subscriber costs one load; subscribers get matching lines") {
  TapHub hub;
  CHECK_FALSE(hub.active());
  CHECK_FALSE(hub.wants(TapEventMeta{0, false, 1, "", false}));
  TapFilter only_produce;
  only_produce.api_key = 0;
  auto s = hub.subscribe(only_produce);
  REQUIRE(s);
  CHECK(hub.active());
  CHECK(hub.wants(TapEventMeta{0, false, 1, "", false}));
  CHECK_FALSE(hub.wants(TapEventMeta{1, false, 1, "", false}));
  hub.publish(TapEventMeta{0, false, 1, "", false}, "{\"a\":1}");
  hub.publish(TapEventMeta{1, false, 1, "", false}, "{\"b\":1}");
  CHECK(s->next(10ms) == "{\"a\":1}\n");
  CHECK(s->next(1ms) == "");
  hub.unsubscribe(s);
  CHECK_FALSE(hub.active());
}

TEST_CASE("tap: a slow subscriber drops and counts, never blocks the publisher") {
  TapLimits limits;
  limits.queue_lines = 10;
  limits.max_subscribers = 1;
  TapHub hub(limits);
  auto s = hub.subscribe({});
  REQUIRE(s);
  CHECK(hub.subscribe({}) == nullptr);  // over max_subscribers
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100000; ++i) hub.publish(TapEventMeta{0, false, 1, "", false}, "{\"n\":" + std::to_string(i) + "}");
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK(s->dropped() == 100000 - 10);
  CHECK(hub.dropped_total() == 100000 - 10);
  std::string lines = s->next(1ms);
  CHECK(lines.rfind("{\"dropped\":99990}\n", 0) == 0);
  CHECK(lines.find("{\"n\":9}\n") != std::string::npos);
  CHECK(lines.find("{\"n\":10}") == std::string::npos);
  hub.close_all();
  CHECK(s->closed());
}

TEST_CASE("tap: transaction events go only to ?transactions subscribers, and frames only to the others") {
  TapFilter frames, txns;
  CHECK(parse_filter({}, frames) == "");
  CHECK(parse_filter({{"transactions", "true"}, {"api", "EndTxn"}}, txns) == "");
  CHECK(txns.transactions);
  TapEventMeta frame{26, true, 1, "app", false, false};
  TapEventMeta step{26, false, 1, "app", false, true};
  TapEventMeta other_api{0, false, 1, "app", false, true};
  CHECK(frames.matches(frame));
  CHECK(!frames.matches(step));
  CHECK(txns.matches(step));
  CHECK(!txns.matches(frame));
  CHECK(!txns.matches(other_api));  // the api filter applies to the step's API
  TapFilter bad;
  CHECK(parse_filter({{"transactions", "maybe"}}, bad).find("transactions must be true or false") != std::string::npos);
}
