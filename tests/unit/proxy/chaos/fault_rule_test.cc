#include "proxy/chaos/fault_rule.h"

#include <doctest/doctest.h>

using kproxy::chaos::FaultRule;
using kproxy::chaos::parse_fault_rule;
using nlohmann::json;

namespace {
std::shared_ptr<FaultRule> parse_ok(const char* text) {
  std::string error;
  auto r = parse_fault_rule(json::parse(text), error);
  INFO(error);
  REQUIRE(r);
  return r;
}
std::string parse_error(const char* text) {
  std::string error;
  auto r = parse_fault_rule(json::parse(text), error);
  CHECK(!r);
  return error;
}
}  // namespace

TEST_CASE("globs longer than 256 characters are refused, and the refusal quotes only their start") {
  using kproxy::chaos::glob_error;
  // Found by fuzz_admin_json (tests/fuzz/regressions/admin_json/slow-glob-16k): a 16 KB glob of
  // '*' and classes matched against itself took 10 s (time up to pattern x text length).
  CHECK(glob_error(std::string(256, 'a')).empty());
  std::string e = glob_error(std::string(257, 'a'));
  CHECK(e.find("257 characters long (at most 256)") != std::string::npos);
  CHECK(e.size() < 120);
  std::string e2;
  auto rule =
      kproxy::chaos::parse_fault_rule(nlohmann::json::parse(R"({"name":"g","match":{"api":"Produce","client_id":")" +
                                                            std::string(300, '*') + R"("},"action":{"error":"NOT_LEADER_OR_FOLLOWER"}})"),
                                      e2);
  CHECK(rule == nullptr);
  CHECK(e2.find("at most 256") != std::string::npos);
}

TEST_CASE("a rule parses match, action and trigger") {
  auto r = parse_ok(R"({"name":"fence","match":{"api":"AddPartitionsToTxn","versions":"0-3","transactional_id":"orders-*"},
                        "action":{"error":"PRODUCER_FENCED"},"trigger":{"times":2}})");
  CHECK(r->name == "fence");
  REQUIRE(r->match.apis.size() == 1);
  CHECK(r->match.apis[0] == 24);
  CHECK(r->match.versions.max == 3);
  CHECK(r->action.kind == kproxy::chaos::ActionKind::kError);
  CHECK(r->action.error_code == 90);
  CHECK(r->match.needs_body());
  // v0-1 get INVALID_PRODUCER_EPOCH, as the broker sends (KIP-588)
  REQUIRE(r->notes.size() == 1);
  CHECK(r->notes[0].find("INVALID_PRODUCER_EPOCH") != std::string::npos);
  CHECK(r->matches_header(24, 3, "kafka", std::nullopt));
  CHECK(!r->matches_header(24, 4, "kafka", std::nullopt));
  CHECK(!r->matches_header(26, 3, "kafka", std::nullopt));
}

TEST_CASE("invalid rules are refused with the path of the bad key") {
  CHECK(parse_error(R"({"name":"x","match":{"api":"EndTxnn"},"action":{"error":"NOT_COORDINATOR"}})")
            .rfind("match.api: unknown API 'EndTxnn'", 0) == 0);
  CHECK(parse_error(R"({"name":"x","match":{"api":"EndTxn"},"action":{"error":"NOT_A_CODE"}})").rfind("action.error: unknown error", 0) ==
        0);
  CHECK(parse_error(R"({"name":"x","match":{"api":"EndTxn","topic":"a[b"},"action":{"error":16}})").rfind("match.topic: glob", 0) == 0);
  CHECK(parse_error(R"({"name":"x","match":{"api":"FindCoordinator"},"action":{"error":"TRANSACTION_ABORTABLE"}})")
            .find("not a valid error for FindCoordinator") != std::string::npos);
  CHECK(parse_error(R"({"name":"x","match":{"api":"EndTxn","versions":"9-12"},"action":{"error":16}})").rfind("match.versions", 0) == 0);
  CHECK(parse_error(R"({"name":"x","match":{"api":"EndTxn"},"action":{"error":16},"trigger":{"probability":0.5}})")
            .rfind("trigger.seed", 0) == 0);
  CHECK(
      parse_error(R"({"name":"x","match":{"api":"EndTxn"},"action":{"error":16},"trigger":{"once":true,"times":2}})").rfind("trigger", 0) ==
      0);
  CHECK(parse_error(R"({"name":"x","match":{"api":"EndTxn"},"action":{"error":16,"delay":5}})").rfind("action", 0) == 0);
  CHECK(parse_error(R"({"name":"x","match":{"apis":"EndTxn"},"action":{"error":16}})").rfind("match.apis: unknown key", 0) == 0);
  CHECK(parse_error(R"({"name":"bad name","action":{"drop_response":true}})").rfind("name:", 0) == 0);
  CHECK(parse_error(R"({"name":"x","action":{"error":16}})").rfind("match.api", 0) == 0);
  CHECK(
      parse_error(R"({"name":"x","match":{"api":"Metadata"},"action":{"answer":"UNKNOWN_SERVER_ERROR"}})").find("cannot build an answer") !=
      std::string::npos);
}

TEST_CASE("triggers: once, nth, times, after, probability with a seed") {
  auto once = parse_ok(R"({"name":"a","action":{"drop_response":true},"trigger":"once"})");
  CHECK(once->decide(1));
  CHECK(!once->decide(2));
  auto nth = parse_ok(R"({"name":"a","action":{"drop_response":true},"trigger":{"nth":3}})");
  CHECK(!nth->decide(2));
  CHECK(nth->decide(3));
  CHECK(!nth->decide(4));
  auto times = parse_ok(R"({"name":"a","action":{"drop_response":true},"trigger":{"after":1,"times":2}})");
  CHECK(!times->decide(1));
  CHECK(times->decide(2));
  CHECK(times->decide(3));
  CHECK(!times->decide(4));
  auto always = parse_ok(R"({"name":"a","action":{"drop_response":true}})");
  CHECK(always->decide(1000));
  auto p = parse_ok(R"({"name":"a","action":{"drop_response":true},"trigger":{"probability":0.25,"seed":7}})");
  auto p2 = parse_ok(R"({"name":"b","action":{"drop_response":true},"trigger":{"probability":0.25,"seed":7}})");
  int injected = 0;
  for (uint64_t n = 1; n <= 4000; ++n) {
    CHECK(p->decide(n) == p2->decide(n));  // reproducible
    injected += p->decide(n) ? 1 : 0;
  }
  CHECK(injected > 800);
  CHECK(injected < 1200);
}

TEST_CASE("fire counts hits and injections atomically, honours the window") {
  auto r = parse_ok(R"({"name":"a","action":{"drop_response":true},"trigger":{"times":2}})");
  auto now = std::chrono::steady_clock::now();
  CHECK(r->fire(now));
  CHECK(r->fire(now));
  CHECK(!r->fire(now));
  CHECK(r->stats->hits == 3);
  CHECK(r->stats->injected == 2);
  auto w = parse_ok(R"({"name":"a","action":{"drop_response":true},"window":{"after":"1s","for":"2s"}})");
  CHECK(!w->fire(w->installed_at));
  CHECK(w->fire(w->installed_at + std::chrono::milliseconds(1500)));
  CHECK(!w->fire(w->installed_at + std::chrono::seconds(4)));
  CHECK(w->stats->hits == 1);
}

TEST_CASE("durations") {
  using kproxy::chaos::parse_duration;
  CHECK(parse_duration(json(250))->count() == 250);
  CHECK(parse_duration(json("2s"))->count() == 2000);
  CHECK(parse_duration(json("15ms"))->count() == 15);
  CHECK(!parse_duration(json("2h")));
  CHECK(!parse_duration(json(-1)));
}

TEST_CASE("durations are bounded: huge, negative or NaN-like values are refused, not converted") {
  // Found by the admin_json fuzzer: a float delay of 1e30 overflowed the conversion to milliseconds.
  CHECK(parse_error(R"({"name":"x","match":{"api":"EndTxn"},"action":{"delay":1e30}})").rfind("action.delay", 0) == 0);
  CHECK(parse_error(R"({"name":"x","match":{"api":"EndTxn"},"action":{"delay":-5}})").rfind("action.delay", 0) == 0);
  CHECK(parse_error(R"({"name":"x","match":{"api":"EndTxn"},"action":{"delay":"99999999999m"}})").rfind("action.delay", 0) == 0);
  CHECK(parse_error(R"({"name":"x","match":{"api":"EndTxn"},"action":{"delay":"250ms","jitter":90000000}})").rfind("action.jitter", 0) ==
        0);
  auto ok = parse_ok(R"({"name":"x","match":{"api":"EndTxn"},"action":{"delay":"2s","jitter":12.5}})");
  CHECK(ok->action.delay == std::chrono::milliseconds(2000));
  CHECK(ok->action.jitter == std::chrono::milliseconds(12));
}

TEST_CASE("transport toxics parse: bandwidth and slice with a direction") {
  auto bw = parse_ok(R"({"name":"slow","action":{"bandwidth":65536,"direction":"both"}})");
  CHECK(bw->action.kind == kproxy::chaos::ActionKind::kBandwidth);
  CHECK(bw->action.bytes == 65536);
  CHECK((bw->action.to_client && bw->action.to_broker));
  auto sl = parse_ok(R"({"name":"cut","match":{"api":"Fetch"},"action":{"slice":7,"slice_delay":"3ms"}})");
  CHECK(sl->action.kind == kproxy::chaos::ActionKind::kSlice);
  CHECK(sl->action.bytes == 7);
  CHECK(sl->action.slice_delay.count() == 3);
  CHECK((sl->action.to_client && !sl->action.to_broker));  // responses by default
  auto up = parse_ok(R"({"name":"up","action":{"slice":1,"direction":"to_broker"}})");
  CHECK((!up->action.to_client && up->action.to_broker));
  CHECK(parse_error(R"({"name":"x","action":{"bandwidth":0}})").rfind("action.bandwidth: expected an integer >= 1", 0) == 0);
  CHECK(parse_error(R"({"name":"x","action":{"slice":8,"direction":"up"}})").rfind("action.direction:", 0) == 0);
  CHECK(parse_error(R"({"name":"x","action":{"slice":8,"slice_delay":"fast"}})").rfind("action.slice_delay:", 0) == 0);
  CHECK(parse_error(R"({"name":"x","action":{"bandwidth":8,"slice_delay":"1ms"}})").rfind("action.slice_delay: unknown key", 0) == 0);
  CHECK(std::string(kproxy::chaos::action_name(kproxy::chaos::ActionKind::kSlice)) == "slice");
}

TEST_CASE("duplicate_request: true is an action of its own, and only true") {
  auto rule = parse_ok(R"({"name":"twice","match":{"api":"Produce"},"action":{"duplicate_request":true},"trigger":"once"})");
  CHECK(rule->action.kind == kproxy::chaos::ActionKind::kDuplicateRequest);
  CHECK(std::string(kproxy::chaos::action_name(rule->action.kind)) == "duplicate_request");
  CHECK(parse_error(R"({"name":"x","action":{"duplicate_request":false}})").rfind("action.duplicate_request: expected true", 0) == 0);
  CHECK(parse_error(R"({"name":"x","action":{"duplicate_request":true,"drop_response":true}})").rfind("action", 0) == 0);
  CHECK(parse_error(R"({"name":"x","action":{"duplicate_request":true,"side":"request"}})").rfind("action", 0) == 0);
}
