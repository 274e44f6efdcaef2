// Pipeline with fault rules on a real libuv loop and a recording PipelineOutput (no sockets): the
// transport toxics' wiring (which bytes each direction's shaper sees), reset_after_bytes, topic-id
// matching learned from a Metadata response, response order and the typed close reasons.
#include "proxy/pipeline/pipeline.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "codec/frame_reader.h"
#include "codec/generated/messages/metadata.h"
#include "codec/generated/messages/produce.h"
#include "codec/request_header.h"
#include "codec/response_header.h"
#include "codec/writer.h"
#include "proxy/chaos/answer_builder.h"
#include "tests/unit/support/pipeline.h"

using namespace kproxy;
using net::CloseCategory;
using pipeline::Pipeline;

namespace {

using kproxy::testing::close_loop;
using kproxy::testing::PipelineCollaborators;
using kproxy::testing::put_rule;
using kproxy::testing::raw_request_frame;
using Recorder = kproxy::testing::RecordingOutput;

// Heartbeat v0: GroupId "g", GenerationId 1, MemberId "m"; its response is an error code.
std::vector<uint8_t> heartbeat_request(int32_t correlation_id) {
  return raw_request_frame(12, 0, correlation_id, {0, 1, 'g', 0, 0, 0, 1, 0, 1, 'm'});
}
std::vector<uint8_t> heartbeat_response(int32_t correlation_id) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  w.int32(6);
  w.int32(correlation_id);
  w.int16(0);
  return out;
}

bool offer(Pipeline& p, const std::vector<uint8_t>& frame) { return p.on_request_frame(codec::Bytes(frame.data(), frame.size())); }
bool answer(Pipeline& p, const std::vector<uint8_t>& frame) { return p.on_response_frame(codec::Bytes(frame.data(), frame.size())); }

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x;
  return s;
}

void drain(uv_loop_t* loop, const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < deadline) uv_run(loop, UV_RUN_ONCE);
}

}  // namespace

TEST_CASE("pipeline: a slice rule to the broker cuts the request, to the client the response") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  put_rule(control, "up", R"({"match":{"api":"Heartbeat"},"action":{"slice":5,"direction":"to_broker"}})");
  put_rule(control, "down", R"({"match":{"api":"Heartbeat"},"action":{"slice":4}})");
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{1, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    auto request = heartbeat_request(7);
    REQUIRE(offer(p, request));
    CHECK(rec.to_broker.size() == (request.size() + 4) / 5);
    CHECK(rec.to_broker.front().size() == 5);
    CHECK(joined(rec.to_broker) == std::string(request.begin(), request.end()));
    auto response = heartbeat_response(7);
    REQUIRE(answer(p, response));
    CHECK(rec.to_client == std::vector<std::string>{std::string(response.begin(), response.begin() + 4),
                                                    std::string(response.begin() + 4, response.begin() + 8),
                                                    std::string(response.begin() + 8, response.end())});
    // Without the rules the next exchange passes whole.
    control.reset_rules();
    rec.to_broker.clear();
    rec.to_client.clear();
    auto request2 = heartbeat_request(8);
    REQUIRE(offer(p, request2));
    CHECK(rec.to_broker.size() == 1);
    auto response2 = heartbeat_response(8);
    REQUIRE(answer(p, response2));
    CHECK(rec.to_client.size() == 1);
    p.shutdown();
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: a delayed request keeps its toxic until it is forwarded") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  put_rule(control, "hold", R"({"match":{"api":"Heartbeat"},"action":{"delay":20,"side":"request"}})");
  put_rule(control, "up", R"({"match":{"api":"Heartbeat"},"action":{"slice":3,"direction":"to_broker"}})");
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{2, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    auto request = heartbeat_request(1);
    REQUIRE(offer(p, request));
    CHECK(rec.to_broker.empty());
    drain(&loop, [&] { return joined(rec.to_broker).size() == request.size(); });
    CHECK(rec.to_broker.size() == (request.size() + 2) / 3);
    CHECK(joined(rec.to_broker) == std::string(request.begin(), request.end()));
    p.shutdown();
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: reset_after_bytes sends N bytes, then resets and closes") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  put_rule(control, "rst", R"({"match":{"api":"Heartbeat"},"action":{"reset_after_bytes":5},"trigger":"once"})");
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{3, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    auto request = heartbeat_request(4);
    REQUIRE(offer(p, request));
    auto response = heartbeat_response(4);
    CHECK_FALSE(answer(p, response));  // the connection closed itself
    CHECK(joined(rec.to_client) == std::string(response.begin(), response.begin() + 5));
    CHECK(rec.resets == 1);
    REQUIRE(rec.closed);
    CHECK(rec.closed->category == CloseCategory::kFault);
    CHECK(rec.closed->detail.find("reset after") != std::string::npos);
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: topic ids learned from a Metadata response make topic: rules match Produce v13") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  put_rule(control, "by-name", R"({"match":{"api":"Produce","topic":"pipeline-test-orders"},"action":{"delay":0}})");
  Recorder rec;
  codec::Uuid id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(0xa0 + i);
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{4, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    // Produce v13 naming the topic by id, before kproxy knows the id: no match.
    codec::ProduceRequest produce;
    produce.acks = 1;
    produce.topic_data.emplace_back().topic_id = id;
    produce.topic_data[0].partition_data.emplace_back().index = 0;
    std::vector<uint8_t> body;
    codec::Writer bw(body);
    produce.write(bw, 13);
    auto frame = raw_request_frame(0, 13, 10, body, true);
    REQUIRE(offer(p, frame));
    CHECK(control.rule("by-name")->stats->hits == 0);
    // A Metadata v12 response names the id.
    codec::MetadataResponse md;
    auto& t = md.topics.emplace_back();
    t.name = "pipeline-test-orders";
    t.topic_id = id;
    REQUIRE(offer(p, raw_request_frame(3, 12, 11, {1, 1, 0, 0}, true)));
    auto md_frame = codec::encode_response_frame(11, 1, md, 12);
    // The Produce response comes first (FIFO), then Metadata's.
    auto produce_response = codec::encode_response_frame(10, 1, codec::ProduceResponse{}, 13);
    REQUIRE(answer(p, produce_response));
    REQUIRE(answer(p, md_frame));
    // The same Produce again: now it matches by name.
    REQUIRE(offer(p, raw_request_frame(0, 13, 12, body, true)));
    CHECK(control.rule("by-name")->stats->hits == 1);
    p.shutdown();
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: bytes held by a transport toxic are reported per direction until released, each release followed by a flush") {
  // ClientConnection counts held_bytes_to_*() toward the write-queue high-water mark and
  // re-checks backpressure in PipelineOutput::flush (proxy/connection/client_connection.cc).
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  put_rule(control, "slow",
           R"({"match":{"api":"Heartbeat"},"action":{"bandwidth":100},"trigger":{"once":true}})");  // 2-byte pieces, 20 ms apart
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{1, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    auto request = heartbeat_request(7), request2 = heartbeat_request(8);
    REQUIRE(offer(p, request));
    REQUIRE(offer(p, request2));  // the rule fired once: not shaped
    CHECK(p.held_bytes_to_broker() == 0);
    auto response = heartbeat_response(7), response2 = heartbeat_response(8);
    REQUIRE(answer(p, response));
    CHECK(p.held_bytes_to_client() == response.size() - 2);  // the first piece left at once
    REQUIRE(answer(p, response2));
    CHECK(p.held_bytes_to_client() == response.size() - 2 + response2.size());  // waits behind: counted too
    size_t peak = p.held_bytes_to_client();
    bool decreasing = true;
    drain(&loop, [&] {
      size_t now = p.held_bytes_to_client();
      decreasing = decreasing && now <= peak;
      peak = now;
      return now == 0;
    });
    CHECK(decreasing);
    CHECK(p.held_bytes_to_client() == 0);
    // A flush follows the releases (a late timer may release several pieces at once): that is
    // where the connection resumes reading.
    CHECK(rec.flushes >= 1);
    CHECK(rec.client_bytes_at_flush == response.size() + response2.size());
    CHECK(joined(rec.to_client) == std::string(response.begin(), response.end()) + std::string(response2.begin(), response2.end()));
    p.shutdown();
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: requests and responses held by a delay count as held bytes until they leave") {
  // A long delay with a pipelining client would otherwise hold unbounded memory: ClientConnection
  // stops reading the sending side once these pass the write-queue high-water mark.
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  put_rule(control, "hold-request", R"({"match":{"api":"Heartbeat"},"action":{"delay":30,"side":"request"},"trigger":{"once":true}})");
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{5, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    auto first = heartbeat_request(1), second = heartbeat_request(2);
    REQUIRE(offer(p, first));
    // The rule fired once, but the second request must wait behind the first (order is kept).
    REQUIRE(offer(p, second));
    CHECK(p.held_bytes_to_broker() == first.size() + second.size());
    CHECK(p.held_bytes_to_client() == 0);
    drain(&loop, [&] { return joined(rec.to_broker).size() == first.size() + second.size(); });
    CHECK(p.held_bytes_to_broker() == 0);
    CHECK(joined(rec.to_broker) == std::string(first.begin(), first.end()) + std::string(second.begin(), second.end()));
    for (int32_t id : {1, 2}) {  // answered at once: nothing held for the client
      auto r = heartbeat_response(id);
      REQUIRE(answer(p, r));
    }
    CHECK(rec.to_client.size() == 2);
    CHECK(p.held_bytes_to_client() == 0);
    rec.to_client.clear();

    // A delayed response holds its own bytes and those of every response behind it.
    put_rule(control, "hold-response", R"({"match":{"api":"Heartbeat"},"action":{"delay":30,"side":"response"},"trigger":{"once":true}})");
    auto third = heartbeat_request(3), fourth = heartbeat_request(4);
    REQUIRE(offer(p, third));
    REQUIRE(offer(p, fourth));
    auto r3 = heartbeat_response(3), r4 = heartbeat_response(4);
    REQUIRE(answer(p, r3));
    REQUIRE(answer(p, r4));
    CHECK(rec.to_client.empty());
    CHECK(p.held_bytes_to_client() == r3.size() + r4.size());
    drain(&loop, [&] { return rec.to_client.size() == 2; });
    CHECK(p.held_bytes_to_client() == 0);
    CHECK(joined(rec.to_client) == std::string(r3.begin(), r3.end()) + std::string(r4.begin(), r4.end()));
    p.shutdown();
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: a response whose correlation id differs closes with a broker protocol error") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{6, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    REQUIRE(offer(p, heartbeat_request(1)));
    CHECK(p.awaiting_broker() == 1);
    CHECK_FALSE(answer(p, heartbeat_response(2)));
    REQUIRE(rec.closed);
    CHECK(rec.closed->category == CloseCategory::kBrokerProtocolError);
    CHECK(rec.closed->detail.find("correlation id mismatch") != std::string::npos);
    CHECK(rec.to_client.empty());
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: a response with nothing in flight closes with a broker protocol error") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{7, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    CHECK_FALSE(answer(p, heartbeat_response(1)));
    REQUIRE(rec.closed);
    CHECK(rec.closed->category == CloseCategory::kBrokerProtocolError);
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: a request header that does not parse closes with a client protocol error") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{8, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    std::vector<uint8_t> truncated{0, 0, 0, 3, 0, 12, 0};  // size 3: api key and half a version
    CHECK_FALSE(offer(p, truncated));
    REQUIRE(rec.closed);
    CHECK(rec.closed->category == CloseCategory::kClientProtocolError);
    CHECK(rec.to_broker.empty());
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: a close-before rule closes with the fault category and forwards nothing") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  put_rule(control, "cut", R"({"match":{"api":"Heartbeat"},"action":{"close":"before"}})");
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{9, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    CHECK_FALSE(offer(p, heartbeat_request(1)));
    REQUIRE(rec.closed);
    CHECK(rec.closed->category == CloseCategory::kFault);
    CHECK(rec.closed->detail.find("'cut'") != std::string::npos);
    CHECK(rec.to_broker.empty());
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: kproxy's own answer waits for the broker's answers to earlier requests") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  put_rule(control, "fence", R"({"match":{"api":"Heartbeat"},"action":{"answer":"REBALANCE_IN_PROGRESS"},"trigger":{"nth":2}})");
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{10, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    auto first = heartbeat_request(1), second = heartbeat_request(2), third = heartbeat_request(3);
    REQUIRE(offer(p, first));
    REQUIRE(offer(p, second));  // answered by the rule: never reaches the broker
    REQUIRE(offer(p, third));
    CHECK(joined(rec.to_broker) == std::string(first.begin(), first.end()) + std::string(third.begin(), third.end()));
    CHECK(rec.to_client.empty());  // the answer to 2 waits for the broker's answer to 1
    CHECK(p.awaiting_broker() == 2);
    REQUIRE(answer(p, heartbeat_response(1)));
    REQUIRE(rec.to_client.size() == 2);
    CHECK(codec::peek_response_correlation_id(
              codec::Bytes(reinterpret_cast<const uint8_t*>(rec.to_client[1].data()), rec.to_client[1].size()).subspan(4)) == 2);
    REQUIRE(answer(p, heartbeat_response(3)));  // matched with request 3, not with the answered 2
    CHECK(rec.to_client.size() == 3);
    CHECK_FALSE(rec.closed);
    CHECK(p.idle());
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: a large request may be streamed only when nothing can act on it before forwarding") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{1, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    auto heartbeat = heartbeat_request(7);
    codec::Bytes head(heartbeat.data(), heartbeat.size());
    // Given no fault rules, a Heartbeat may go while it arrives; ApiVersions (the stage may
    // answer it) and a head too short for the header may not
    CHECK(p.may_stream_request(head));
    CHECK_FALSE(p.may_stream_request(head.first(9)));
    auto api_versions = raw_request_frame(18, 3, 1, {0});
    CHECK_FALSE(p.may_stream_request(codec::Bytes(api_versions.data(), api_versions.size())));
    // When a rule names Heartbeat (whatever its action), it may not
    put_rule(control, "slow", R"({"match":{"api":"Heartbeat"},"action":{"delay":1,"side":"request"}})");
    CHECK_FALSE(p.may_stream_request(head));
    // And a rule on another API leaves Heartbeat streamable
    control.reset_rules();
    put_rule(control, "other", R"({"match":{"api":"Produce"},"action":{"error":"NOT_LEADER_OR_FOLLOWER"}})");
    CHECK(p.may_stream_request(head));
    // A streamed request without rules is forwarded as usual; its response comes back in order
    REQUIRE(p.on_request_frame(head, std::chrono::steady_clock::now(), /*streamed=*/true));
    CHECK(rec.to_broker.size() == 1);
    auto response = heartbeat_response(7);
    REQUIRE(answer(p, response));
    CHECK(rec.to_client.size() == 1);
    p.shutdown();
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: a rule added while a streamed request arrived closes the connection instead of delaying half a request") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{1, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    auto heartbeat = heartbeat_request(7);
    codec::Bytes frame(heartbeat.data(), heartbeat.size());
    // Given the start of a request was streamed while no rule applied
    REQUIRE(p.may_stream_request(frame));
    // When a delay rule for its API is added before the frame is complete
    put_rule(control, "slow", R"({"match":{"api":"Heartbeat"},"action":{"delay":50,"side":"request"}})");
    // Then the whole frame is not forwarded a second time, and the connection closes with a fault reason
    CHECK_FALSE(p.on_request_frame(frame, std::chrono::steady_clock::now(), /*streamed=*/true));
    CHECK(rec.to_broker.empty());
    REQUIRE(rec.closed);
    CHECK(rec.closed->category == CloseCategory::kFault);
    CHECK(rec.closed->detail.find("Heartbeat") != std::string::npos);
    p.shutdown();
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: frames that go straight on are noted for residence, frames a rule holds are not (issue #32)") {
  using metrics::Direction;
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{9, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    with.metrics.residence_begin(Direction::kRequest);
    with.metrics.residence_begin(Direction::kResponse);
    REQUIRE(offer(p, heartbeat_request(1)));
    CHECK(with.metrics.residence_pending(Direction::kRequest));
    CHECK(answer(p, heartbeat_response(1)));
    CHECK(with.metrics.residence_pending(Direction::kResponse));
    // A request held by a delay rule spends the rule's time, not kproxy's: not noted.
    put_rule(control, "hold", R"({"match":{"api":"Heartbeat"},"action":{"delay":20,"side":"request"}})");
    with.metrics.residence_begin(Direction::kRequest);
    REQUIRE(offer(p, heartbeat_request(2)));
    CHECK(rec.to_broker.size() == 1);
    CHECK_FALSE(with.metrics.residence_pending(Direction::kRequest));
    p.shutdown();
  }
  close_loop(&loop);
}

namespace {

/// Records what the observer is told of each response: withheld or not, and the answers
/// reported withheld when the connection closed.
struct WithheldRecorder final : stage::FrameObserver {
  std::vector<std::pair<int32_t, bool>> responses;  ///< (correlation id, withheld)
  std::vector<int32_t> withheld_on_close;
  void on_response(const stage::ResponseContext& ctx, std::chrono::nanoseconds) override {
    responses.emplace_back(codec::peek_response_correlation_id(ctx.frame().subspan(4)), ctx.withheld());
  }
  void on_response_withheld(uint64_t, int32_t correlation_id) override { withheld_on_close.push_back(correlation_id); }
};

/// A recorder the test's services hand the pipeline as its frame observer.
struct ObserverScope {
  std::shared_ptr<WithheldRecorder> recorder = std::make_shared<WithheldRecorder>();
};

}  // namespace

TEST_CASE("pipeline: the observer learns which answers the client will not get (issue #44)") {
  SUBCASE("a dropped answer and every later one (blackhole)") {
    uv_loop_t loop;
    uv_loop_init(&loop);
    ObserverScope observed;
    chaos::LiveRules control;
    put_rule(control, "hole", R"({"match":{"api":"Heartbeat"},"action":{"drop_response":true},"trigger":{"nth":2}})");
    Recorder rec;
    {
      PipelineCollaborators with;
      with.view.observer = observed.recorder;
      Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{11, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
      for (int32_t c = 1; c <= 3; ++c) REQUIRE(offer(p, heartbeat_request(c)));
      for (int32_t c = 1; c <= 3; ++c) REQUIRE(answer(p, heartbeat_response(c)));
      CHECK(rec.to_client.size() == 1);
    }
    CHECK(observed.recorder->responses == std::vector<std::pair<int32_t, bool>>{{1, false}, {2, true}, {3, true}});
    close_loop(&loop);
  }
  SUBCASE("close after the answer: that answer is withheld") {
    uv_loop_t loop;
    uv_loop_init(&loop);
    ObserverScope observed;
    chaos::LiveRules control;
    put_rule(control, "cut", R"({"match":{"api":"Heartbeat"},"action":{"close":"after"},"trigger":{"nth":1}})");
    Recorder rec;
    {
      PipelineCollaborators with;
      with.view.observer = observed.recorder;
      Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{12, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
      REQUIRE(offer(p, heartbeat_request(1)));
      answer(p, heartbeat_response(1));
      CHECK(rec.closed);
      CHECK(rec.to_client.empty());
    }
    CHECK(observed.recorder->responses == std::vector<std::pair<int32_t, bool>>{{1, true}});
    close_loop(&loop);
  }
  SUBCASE("a delayed answer still held when the connection closes is reported withheld") {
    uv_loop_t loop;
    uv_loop_init(&loop);
    ObserverScope observed;
    chaos::LiveRules control;
    put_rule(control, "slow", R"({"match":{"api":"Heartbeat"},"action":{"delay":"60s"}})");
    Recorder rec;
    {
      PipelineCollaborators with;
      with.view.observer = observed.recorder;
      Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{13, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
      REQUIRE(offer(p, heartbeat_request(7)));
      REQUIRE(answer(p, heartbeat_response(7)));
      CHECK(rec.to_client.empty());
      CHECK(observed.recorder->withheld_on_close.empty());
    }  // the connection goes with the answer still held
    CHECK(observed.recorder->responses == std::vector<std::pair<int32_t, bool>>{{7, false}});
    CHECK(observed.recorder->withheld_on_close == std::vector<int32_t>{7});
    close_loop(&loop);
  }
}

TEST_CASE("pipeline: duplicate_request sends the request twice and the client gets one answer") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  put_rule(control, "twice", R"({"match":{"api":"Heartbeat"},"action":{"duplicate_request":true},"trigger":{"nth":2}})");
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{14, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    auto r1 = heartbeat_request(1), r2 = heartbeat_request(2), r3 = heartbeat_request(3);
    REQUIRE(offer(p, r1));
    REQUIRE(offer(p, r2));  // the rule's hit: sent twice, byte for byte
    REQUIRE(offer(p, r3));
    REQUIRE(rec.to_broker.size() == 4);
    CHECK(rec.to_broker[1] == std::string(r2.begin(), r2.end()));
    CHECK(rec.to_broker[2] == std::string(r2.begin(), r2.end()));
    CHECK(p.awaiting_broker() == 4);
    // The broker answers every copy in order; the second answer to 2 goes nowhere.
    for (int32_t c : {1, 2, 2, 3}) REQUIRE(answer(p, heartbeat_response(c)));
    std::vector<std::string> expected;
    for (int32_t c : {1, 2, 3}) {
      auto r = heartbeat_response(c);
      expected.emplace_back(r.begin(), r.end());
    }
    CHECK(rec.to_client == expected);
    CHECK(p.awaiting_broker() == 0);
    CHECK(p.idle());
    CHECK_FALSE(rec.closed);
  }
  close_loop(&loop);
}

TEST_CASE("pipeline: a duplicated request behind a delay is held twice, released in order") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  chaos::LiveRules control;
  put_rule(control, "slow", R"({"match":{"api":"Heartbeat"},"action":{"delay":"30ms","side":"request"},"trigger":"once"})");
  put_rule(control, "twice", R"({"match":{"api":"Heartbeat"},"action":{"duplicate_request":true},"trigger":"once"})");
  Recorder rec;
  {
    PipelineCollaborators with;
    Pipeline p(&loop, control, with.rewrite, stage::ConnectionInfo{15, "l", 0, nullptr, {}}, rec, with.metrics, with.view);
    auto r1 = heartbeat_request(1), r2 = heartbeat_request(2);
    REQUIRE(offer(p, r1));  // delayed and duplicated
    REQUIRE(offer(p, r2));  // waits behind both copies
    CHECK(rec.to_broker.empty());
    drain(&loop, [&] { return rec.to_broker.size() == 3; });
    REQUIRE(rec.to_broker.size() == 3);
    CHECK(rec.to_broker[0] == std::string(r1.begin(), r1.end()));
    CHECK(rec.to_broker[1] == std::string(r1.begin(), r1.end()));
    CHECK(rec.to_broker[2] == std::string(r2.begin(), r2.end()));
    for (int32_t c : {1, 1, 2}) REQUIRE(answer(p, heartbeat_response(c)));
    CHECK(rec.to_client.size() == 2);
    CHECK(p.idle());
  }
  close_loop(&loop);
}
