#include "proxy/observe/frame_metrics.h"

#include <deque>

#include <doctest/doctest.h>

#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/request_header.h"
#include "codec/response_header.h"
#include "proxy/cluster/topic_names.h"
#include "proxy/metrics/label_values.h"
#include "tests/unit/support/frames.h"
#include "tests/unit/support/text.h"

using namespace kproxy;
using namespace std::chrono_literals;

namespace {

using kproxy::testing::contains;

using kproxy::testing::encoded_response_frame;

struct Fixture {
  metrics::ProxyMetrics metrics;
  tap::TapHub hub;
  cluster::TopicNames topic_names;
  observe::FrameMetrics frames{metrics, hub, topic_names, {"internal", "external"}};
  stage::ConnectionInfo connection{7, "external", 1, nullptr, {}};

  template <class M>
  void respond(const M& body, int16_t version) {
    auto frame = encoded_response_frame(body, version);
    stage::ResponseContext ctx(M::kApiKey, version, codec::response_header_version(M::kApiKey, version), frame, connection);
    frames.on_response(ctx, 2ms);
  }
};

}  // namespace

TEST_CASE("frame metrics: requests and responses count under the connection's listener index") {
  Fixture f;
  f.metrics.set_listener_names({"internal", "external"});
  std::vector<uint8_t> frame(64, 0);
  codec::RequestHeader header;
  header.api_key = 3;
  header.api_version = 12;
  header.header_version = 2;
  stage::RequestContext request(header, frame, f.connection);
  f.frames.on_request(request);
  f.respond(codec::MetadataResponse{}, 12);
  CHECK(f.metrics.requests_total(3) == 1);
  CHECK(f.metrics.responses_total(3) == 1);
  CHECK(f.metrics.latency_count(3) == 1);
  std::string text = f.metrics.render();
  CHECK(contains(text, "kproxy_requests_total{listener=\"external\",api=\"Metadata\",version=\"12\"} 1"));
  CHECK(contains(text, "kproxy_responses_total{listener=\"external\",api=\"Metadata\",version=\"12\"} 1"));
}

TEST_CASE("frame metrics: error codes of Produce and Fetch responses, found by the scan") {
  Fixture f;
  codec::ProduceResponse produce;
  auto& topic = produce.responses.emplace_back();
  topic.name = "orders";
  topic.partition_responses.resize(3);
  topic.partition_responses[0].error_code = 6;  // NOT_LEADER_OR_FOLLOWER
  topic.partition_responses[2].error_code = 6;
  f.respond(produce, 12);
  f.respond(produce, 3);
  CHECK(f.metrics.errors_total(0, 6) == 4);

  codec::FetchResponse fetch;
  fetch.error_code = 0;
  auto& partitions = fetch.responses.emplace_back().partitions;
  partitions.resize(2);
  partitions[1].error_code = 1;  // OFFSET_OUT_OF_RANGE
  f.respond(fetch, 17);
  f.respond(fetch, 4);
  CHECK(f.metrics.errors_total(1, 1) == 2);
  CHECK(f.metrics.errors_total(1, 6) == 0);
}

TEST_CASE("frame metrics: more errors than a scan holds are all counted (decoded instead)") {
  Fixture f;
  codec::ProduceResponse produce;
  auto& topic = produce.responses.emplace_back();
  topic.name = "wide";
  topic.partition_responses.resize(codec::ResponseScan::kMaxErrors + 8);
  for (auto& p : topic.partition_responses) p.error_code = 7;  // REQUEST_TIMED_OUT
  f.respond(produce, 12);
  CHECK(f.metrics.errors_total(0, 7) == codec::ResponseScan::kMaxErrors + 8);
}

TEST_CASE("frame metrics: a body a stage changed is counted as it leaves, not as it came") {
  Fixture f;
  codec::ProduceResponse produce;
  produce.responses.emplace_back().partition_responses.resize(1);
  auto frame = encoded_response_frame(produce, 12);
  stage::ResponseContext ctx(0, 12, 1, frame, f.connection);
  REQUIRE(ctx.scan());
  CHECK(ctx.scan()->error_count == 0);
  auto m = ctx.message();
  REQUIRE(m);
  m->for_each_error_code(12, [](int16_t& code, const codec::ErrorScope&) { code = 47; });  // INVALID_PRODUCER_EPOCH
  ctx.mark_dirty(stage::StageId::kFaultRules);
  f.frames.on_response(ctx, 1ms);
  CHECK(f.metrics.errors_total(0, 47) == 1);
  CHECK(contains(f.metrics.render(), "kproxy_frames_rewritten_total{api=\"Produce\",stage=\"fault_rules\"} 1"));
}

TEST_CASE("frame metrics: undecodable and unknown responses are counted with a reason") {
  Fixture f;
  auto frame = encoded_response_frame(codec::MetadataResponse{}, 12);
  frame.resize(frame.size() - 2);
  stage::ResponseContext cut(3, 12, 1, frame, f.connection);
  CHECK(cut.scan() == nullptr);
  f.frames.on_response(cut, 1ms);
  std::vector<uint8_t> unknown = {0, 0, 0, 4, 0, 0, 0, 9};
  stage::ResponseContext odd(3, 99, -1, unknown, f.connection);
  f.frames.on_response(odd, 1ms);
  std::string text = f.metrics.render();
  CHECK(contains(text, "kproxy_decode_errors_total{api=\"Metadata\",direction=\"response\",reason=\"body\"} 1"));
  CHECK(contains(text, "kproxy_frames_undecoded_total{api=\"Metadata\",reason=\"unknown_version\"} 1"));
}

TEST_CASE("frame metrics: opt-in topic and client id labels, topic ids named from Metadata") {
  Fixture f;
  f.metrics.enable_traffic_labels(true, true, 2);
  auto request = [&](const auto& body, int16_t version, std::string_view client_id) {
    codec::RequestHeader header;
    auto frame = kproxy::testing::encoded_request_frame(body, version, 5, client_id, header);
    stage::RequestContext ctx(header, frame, f.connection);
    f.frames.on_request(ctx);
  };
  codec::ProduceRequest produce;
  produce.acks = 1;
  produce.topic_data.resize(2);
  produce.topic_data[0].name = "orders";
  produce.topic_data[1].name = "payments";
  request(produce, 12, "billing");
  request(produce, 12, "billing");
  request(produce, 12, "shipping");
  request(produce, 12, "audit");  // third client id: folded

  // Fetch v17 names topics by id: unknown until a Metadata response names it.
  codec::Uuid orders_id{};
  orders_id[0] = 42;
  codec::FetchRequest fetch;
  fetch.topics.emplace_back().topic_id = orders_id;
  request(fetch, 17, "billing");
  codec::MetadataResponse metadata;
  auto& t = metadata.topics.emplace_back();
  t.name = "orders";
  t.topic_id = orders_id;
  f.respond(metadata, 12);
  // The pipeline learns the ids of every Metadata response it forwards (proxy/cluster/topic_names.h).
  cluster::learn_topic_ids(metadata, 12, f.topic_names);
  request(fetch, 17, "billing");

  auto* topics = f.metrics.topic_labels();
  auto* clients = f.metrics.client_id_labels();
  REQUIRE(topics);
  REQUIRE(clients);
  CHECK(topics->count_of("orders", 0) == 4);
  CHECK(topics->count_of("payments", 0) == 4);
  CHECK(topics->count_of("orders", 1) == 1);
  CHECK(topics->count_of("other", 1) == 1);  // "unknown_topic_id": the cap of 2 was reached
  CHECK(clients->count_of("billing", 0) == 2);
  CHECK(clients->count_of("billing", 1) == 2);
  CHECK(clients->count_of("shipping", 0) == 1);
  CHECK(clients->count_of("other", 0) == 1);
  std::string text = f.metrics.render();
  CHECK(contains(text, "kproxy_topic_requests_total{api=\"Produce\",topic=\"orders\"} 4"));
  CHECK(contains(text, "kproxy_client_requests_total{api=\"Produce\",client_id=\"other\"} 1"));
  CHECK(contains(text, "kproxy_label_values_folded_total{label=\"topic\"} 1"));
  CHECK(contains(text, "kproxy_label_values_folded_total{label=\"client_id\"} 1"));
}

TEST_CASE("frame metrics: without opt-in there are no topic or client id series") {
  Fixture f;
  CHECK(f.metrics.topic_labels() == nullptr);
  std::string text = f.metrics.render();
  CHECK_FALSE(contains(text, "kproxy_topic_requests_total"));
  CHECK_FALSE(contains(text, "kproxy_label_values_folded_total"));
}

TEST_CASE("frame metrics: a transactional request closed on before forwarding changes no transaction; kproxy's answer adds nothing") {
  // Issue #44: a close-before rule's request reached no broker and got no answer.
  Fixture f;
  std::deque<std::vector<uint8_t>> frames;
  auto send = [&](const auto& body, int16_t version, int32_t correlation, bool close_before, bool answered) {
    codec::RequestHeader header;
    auto& frame = frames.emplace_back(kproxy::testing::encoded_request_frame(body, version, correlation, "app", header));
    stage::RequestContext ctx(header, frame, f.connection);
    if (close_before) ctx.close({net::CloseCategory::kFault, "test: close before forwarding"});
    if (answered) ctx.answer({});
    f.frames.on_request(ctx);
  };
  codec::InitProducerIdRequest init;
  init.transactional_id = "closing";
  init.transaction_timeout_ms = 60000;
  codec::AddPartitionsToTxnRequest add;
  add.v3_and_below_transactional_id = "closing";
  add.v3_and_below_producer_id = 3;
  add.v3_and_below_producer_epoch = 0;
  add.v3_and_below_topics.push_back({"out", {0}, {}});
  codec::EndTxnRequest end;
  end.transactional_id = "closing";
  end.producer_id = 3;
  end.producer_epoch = 0;
  end.committed = true;
  send(init, 4, 1, true, false);
  send(add, 3, 2, true, false);
  send(end, 3, 3, true, false);
  CHECK(f.frames.transactions().history("closing").empty());
  CHECK_FALSE(f.frames.transactions().awaiting_responses());
  // Answered by kproxy: the client has begun a transaction, but no partition was added.
  send(add, 3, 4, false, true);
  auto h = f.frames.transactions().history("closing");
  REQUIRE(h.size() == 1);
  CHECK(h[0].partitions.empty());
  send(add, 3, 5, false, false);
  h = f.frames.transactions().history("closing");
  REQUIRE(h.size() == 1);
  CHECK(h[0].partitions.size() == 1);
}
