// FaultStage: which rules are drawn (hit counted, trigger budget spent, injection counted and
// reported) for a request, issue #15 bug 9: only the rules whose action takes effect.
#include "proxy/chaos/fault_stage.h"

#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <uv.h>

#include "codec/request_header.h"
#include "codec/writer.h"
#include "proxy/chaos/rule_set.h"
#include "proxy/chaos/rule_snapshot.h"
#include "proxy/pipeline/pipeline.h"
#include "proxy/stage/frame_context.h"
#include "tests/unit/support/manual_clock.h"
#include "tests/unit/support/pipeline.h"
#include "tests/unit/support/services.h"

using namespace kproxy;

namespace {

using kproxy::testing::put_rule;
using kproxy::testing::raw_request_frame;

struct Injections final : stage::FrameObserver {
  std::map<std::string, int> by_rule;
  void on_fault_injected(const stage::FaultEvent& e) override { ++by_rule[e.rule.name]; }
};

uint64_t injected(const chaos::LiveRules& c, const std::string& name) { return c.rule(name)->stats->injected.load(); }
uint64_t hits(const chaos::LiveRules& c, const std::string& name) { return c.rule(name)->stats->hits.load(); }

/// Runs `frame` through a FaultStage; returns what it decided.
struct Outcome {
  bool answered = false;
  bool closing = false;
  stage::ExchangeActions actions;
};
Outcome run(chaos::FaultStage& stage, const std::vector<uint8_t>& frame, bool expects_response = true) {
  codec::RequestHeader header;
  codec::Bytes body(frame.data() + 4, frame.size() - 4);
  REQUIRE(codec::read_request_header(body, header, nullptr));
  stage::ConnectionInfo info{1, "l", 0, nullptr, {}};
  stage::RequestContext ctx(header, codec::Bytes(frame.data(), frame.size()), info, expects_response);
  stage.on_request(ctx);
  return Outcome{ctx.answered(), ctx.closing(), ctx.actions()};
}

constexpr int16_t kListGroups = 16;
constexpr int16_t kProduce = 0;

}  // namespace

TEST_CASE("fault stage: of two 'times: 1' answer rules, one request draws the first only; the second keeps its budget") {
  chaos::LiveRules control;
  put_rule(control, "first", R"({"match":{"api":"ListGroups"},"action":{"answer":"NOT_COORDINATOR"},"trigger":{"times":1}})");
  put_rule(control, "second", R"({"match":{"api":"ListGroups"},"action":{"answer":"COORDINATOR_NOT_AVAILABLE"},"trigger":{"times":1}})");
  chaos::RuleSnapshot snapshot(control);
  auto observer = std::make_shared<Injections>();
  testing::TestServices ts;
  stage::Services services = ts.view(observer);
  chaos::FaultStage stage(snapshot, services, 1);

  CHECK(run(stage, raw_request_frame(kListGroups, 0, 1)).answered);
  CHECK(injected(control, "first") == 1);
  CHECK(injected(control, "second") == 0);  // was 1: counted, its one shot spent, nothing sent
  CHECK(hits(control, "second") == 0);
  CHECK(observer->by_rule == std::map<std::string, int>{{"first", 1}});

  // The second request: the first rule's budget is spent, the second answers.
  CHECK(run(stage, raw_request_frame(kListGroups, 0, 2)).answered);
  CHECK(injected(control, "first") == 1);
  CHECK(injected(control, "second") == 1);
  CHECK(observer->by_rule == std::map<std::string, int>{{"first", 1}, {"second", 1}});
  // A third finds both spent: forwarded.
  CHECK_FALSE(run(stage, raw_request_frame(kListGroups, 0, 3)).answered);
}

TEST_CASE("fault stage: error and throttle rules are not drawn for a request kproxy answers; the response-side ones are") {
  chaos::LiveRules control;
  // Listed before the answer rule: the answer still decides first.
  put_rule(control, "err", R"({"match":{"api":"ListGroups"},"action":{"error":"NOT_COORDINATOR"},"trigger":{"times":1}})");
  put_rule(control, "slow", R"({"match":{"api":"ListGroups"},"action":{"throttle":"100ms"}})");
  put_rule(control, "late", R"({"match":{"api":"ListGroups"},"action":{"delay":"10ms","side":"response"}})");
  put_rule(control, "ans", R"({"match":{"api":"ListGroups"},"action":{"answer":"NOT_COORDINATOR"},"trigger":{"times":1}})");
  chaos::RuleSnapshot snapshot(control);
  testing::TestServices ts;
  stage::Services services = ts.view();
  chaos::FaultStage stage(snapshot, services, 1);

  Outcome first = run(stage, raw_request_frame(kListGroups, 0, 1));
  CHECK(first.answered);
  CHECK_FALSE(first.actions.note);  // no error or throttle remembered for the response
  CHECK(first.actions.injected_by == "ans");
  CHECK(first.actions.response_delay.count() == 10);  // applied to kproxy's own answer
  CHECK(hits(control, "err") == 0);
  CHECK(hits(control, "slow") == 0);
  CHECK(injected(control, "late") == 1);

  // Forwarded now (the answer's one shot is spent): the error rule's own one shot is still there.
  Outcome second = run(stage, raw_request_frame(kListGroups, 0, 2));
  CHECK_FALSE(second.answered);
  CHECK(second.actions.note);  // the error and the throttle, for when the response passes
  CHECK(second.actions.injected_by == "err");
  CHECK(injected(control, "err") == 1);
  CHECK(injected(control, "slow") == 1);
}

TEST_CASE("fault stage: a request without a response (acks=0) draws no answer nor response-side rule") {
  chaos::LiveRules control;
  put_rule(control, "ans", R"({"match":{"api":"Produce"},"action":{"answer":"NOT_LEADER_OR_FOLLOWER"},"trigger":{"times":1}})");
  put_rule(control, "drop", R"({"match":{"api":"Produce"},"action":{"drop_response":true},"trigger":{"times":1}})");
  put_rule(control, "hold", R"({"match":{"api":"Produce"},"action":{"delay":"5ms","side":"request"},"trigger":{"times":1}})");
  chaos::RuleSnapshot snapshot(control);
  testing::TestServices ts;
  stage::Services services = ts.view();
  chaos::FaultStage stage(snapshot, services, 1);
  // Produce v3 with acks=0: transactional id null, acks 0, timeout, no topics.
  std::vector<uint8_t> body = {0xff, 0xff, 0, 0, 0, 0, 0x03, 0xe8, 0, 0, 0, 0};
  Outcome o = run(stage, raw_request_frame(kProduce, 3, 1, body), /*expects_response=*/false);
  CHECK_FALSE(o.answered);
  CHECK(o.actions.fate == stage::ResponseFate::kDeliver);
  CHECK(o.actions.request_delay.count() == 5);
  CHECK(hits(control, "ans") == 0);
  CHECK(hits(control, "drop") == 0);
  CHECK(injected(control, "hold") == 1);
}

TEST_CASE("fault stage: the first of answer / close-before that fires wins; a later close does not destroy the answer") {
  chaos::LiveRules control;
  put_rule(control, "ans", R"({"match":{"api":"ListGroups"},"action":{"answer":"NOT_COORDINATOR"}})");
  put_rule(control, "cut", R"({"match":{"api":"ListGroups"},"action":{"close":"before"}})");
  chaos::RuleSnapshot snapshot(control);
  testing::TestServices ts;
  stage::Services services = ts.view();
  chaos::FaultStage stage(snapshot, services, 1);
  Outcome o = run(stage, raw_request_frame(kListGroups, 0, 1));
  CHECK(o.answered);
  CHECK_FALSE(o.closing);
  CHECK(hits(control, "cut") == 0);
}

TEST_CASE("fault stage: close after names its rule, in the exchange and in the pipeline's close reason") {
  chaos::LiveRules control;
  put_rule(control, "cut-after", R"({"match":{"api":"ListGroups"},"action":{"close":"after"}})");
  chaos::RuleSnapshot snapshot(control);
  testing::TestServices ts;
  stage::Services services = ts.view();
  chaos::FaultStage stage(snapshot, services, 1);
  Outcome o = run(stage, raw_request_frame(kListGroups, 0, 1));
  CHECK(o.actions.fate == stage::ResponseFate::kCloseInstead);
  CHECK(o.actions.close_reason.find("fault rule 'cut-after'") != std::string::npos);

  kproxy::testing::RecordingOutput out;
  kproxy::testing::PipelineCollaborators with;
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    pipeline::Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{2, "l", 0, nullptr, {}}, out, with.metrics, with.view);
    auto request = raw_request_frame(kListGroups, 0, 7);
    REQUIRE(p.on_request_frame(codec::Bytes(request.data(), request.size())));
    // ListGroups v0 response: correlation id, ErrorCode 0, no groups.
    std::vector<uint8_t> response = {0, 0, 0, 10, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0};
    (void)p.on_response_frame(codec::Bytes(response.data(), response.size()));
    REQUIRE(out.closed);
    INFO(out.closed->detail);
    CHECK(out.closed->detail.find("fault rule 'cut-after'") != std::string::npos);
  }
  kproxy::testing::close_loop(&loop);
}

TEST_CASE("fault stage: a drop blackholes the connection: every later exchange's response is swallowed, a later close does not undo it") {
  chaos::LiveRules control;
  put_rule(control, "hole", R"({"match":{"api":"ListGroups"},"action":{"drop_response":true},"trigger":{"nth":2}})");
  put_rule(control, "cut", R"({"match":{"api":"Heartbeat"},"action":{"close":"after"}})");
  chaos::RuleSnapshot snapshot(control);
  testing::TestServices ts;
  stage::Services services = ts.view();
  chaos::FaultStage stage(snapshot, services, 1);
  CHECK(run(stage, raw_request_frame(kListGroups, 0, 1)).actions.fate == stage::ResponseFate::kDeliver);
  CHECK(run(stage, raw_request_frame(kListGroups, 0, 2)).actions.fate == stage::ResponseFate::kSwallow);
  CHECK(run(stage, raw_request_frame(kListGroups, 0, 3)).actions.fate == stage::ResponseFate::kSwallow);  // no rule fires: still swallowed
  CHECK(run(stage, raw_request_frame(12, 0, 4)).actions.fate ==
        stage::ResponseFate::kSwallow);  // Heartbeat: the close is drawn, the hang stays
  CHECK(injected(control, "hole") == 1);

  // A new connection's stage starts without the blackhole.
  chaos::FaultStage fresh(snapshot, services, 2);
  CHECK(run(fresh, raw_request_frame(kListGroups, 0, 1)).actions.fate == stage::ResponseFate::kDeliver);
}

TEST_CASE("fault stage: duplicate_request asks for two copies; transport and reset rules need a shaper port") {
  chaos::LiveRules control;
  put_rule(control, "twice", R"({"match":{"api":"ListGroups"},"action":{"duplicate_request":true},"trigger":"once"})");
  put_rule(control, "rst", R"({"match":{"api":"ListGroups"},"action":{"reset_after_bytes":3}})");
  put_rule(control, "thin", R"({"match":{"api":"ListGroups"},"action":{"bandwidth":1000,"direction":"both"}})");
  chaos::RuleSnapshot snapshot(control);
  testing::TestServices ts;
  stage::Services services = ts.view();
  chaos::FaultStage alone(snapshot, services, 1);  // no port: nothing to shape with
  Outcome o = run(alone, raw_request_frame(kListGroups, 0, 1));
  CHECK(o.actions.copies == 2);
  CHECK_FALSE(o.actions.to_client);
  CHECK_FALSE(o.actions.to_broker);
  CHECK(hits(control, "rst") == 0);
  CHECK(hits(control, "thin") == 0);
}

TEST_CASE("fault stage: a rule's window (after / for) is read on the stage's clock, so a test moves time instead of sleeping") {
  testing::TestServices ts;
  testing::ManualClock& clock = ts.manual;
  chaos::LiveRules control(clock);  // the rule's window counts from its install time on this clock
  put_rule(control, "later", R"({"match":{"api":"ListGroups"},"action":{"answer":"NOT_COORDINATOR"},"window":{"after":"30s","for":"1m"}})");
  chaos::RuleSnapshot snapshot(control);
  stage::Services services = ts.view(nullptr, /*manual_time=*/true);
  chaos::FaultStage stage(snapshot, services, 1);

  CHECK_FALSE(run(stage, raw_request_frame(kListGroups, 0, 1)).answered);  // before the window
  CHECK(hits(control, "later") == 0);
  clock.advance(std::chrono::seconds(31));
  CHECK(run(stage, raw_request_frame(kListGroups, 0, 2)).answered);  // inside it
  CHECK(injected(control, "later") == 1);
  clock.advance(std::chrono::minutes(1));
  CHECK_FALSE(run(stage, raw_request_frame(kListGroups, 0, 3)).answered);  // past it
  CHECK(injected(control, "later") == 1);
}
