// ProcessServices: what the config's metrics: and tap: sections switch on and off in the services
// every layer shares (the frame observer, error-code counting, the transaction tracker), the
// listener slots' names and the tap's limits.
#include "proxy/services/process_services.h"

#include <chrono>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/request_header.h"
#include "codec/response_header.h"
#include "config/config_loader.h"
#include "proxy/stage/frame_context.h"
#include "tests/unit/support/frames.h"

using namespace kproxy;

namespace {

/// A config with listeners `a` and `b` (nothing is bound: ProcessServices only reads it) and `extra`.
std::shared_ptr<const config::Config> config_with(const std::string& extra) {
  std::string yaml =
      "listeners:\n"
      "  - name: a\n    listen: 127.0.0.1:9092\n    upstream: broker-1:9092\n    broker_ports: 9100\n"
      "  - name: b\n    listen: 127.0.0.1:9093\n    upstream: broker-2:9092\n    broker_ports: 9200\n"
      "log: { level: off }\n" +
      extra;
  auto loaded = config::load_config_string(yaml, "unit.yaml");
  REQUIRE_MESSAGE(loaded.ok(), loaded.error_text());
  return loaded.config;
}

constexpr int16_t kMetadata = codec::MetadataResponse::kApiKey;

/// A Metadata v12 response whose one topic has UNKNOWN_TOPIC_OR_PARTITION (3), through the
/// services' observer as a broker answer on listener `listener_index`.
void observe_metadata_error(const stage::Services& view, size_t listener_index) {
  codec::MetadataResponse m;
  m.topics.resize(1);
  m.topics[0].name = "missing";
  m.topics[0].error_code = 3;
  auto frame = kproxy::testing::encoded_response_frame(m, 12);
  stage::ConnectionInfo info{1, "l", listener_index, nullptr, {}};
  stage::ResponseContext ctx(kMetadata, 12, codec::response_header_version(kMetadata, 12), codec::Bytes(frame), info);
  view.observer->on_response(ctx, std::chrono::milliseconds(1));
}

/// An AddPartitionsToTxn v3 exchange (transactional id "orders") that succeeds, through `view`'s observer.
void observe_add_partitions(const stage::Services& view) {
  codec::AddPartitionsToTxnRequest request;
  request.v3_and_below_transactional_id = "orders";
  request.v3_and_below_producer_id = 21;
  request.v3_and_below_topics.resize(1);
  request.v3_and_below_topics[0].name = "out";
  request.v3_and_below_topics[0].partitions = {0};
  codec::RequestHeader header;
  auto request_frame = kproxy::testing::encoded_request_frame(request, 3, 77, "producer", header);
  stage::ConnectionInfo info{1, "l", 0, nullptr, {}};
  stage::RequestContext request_ctx(header, codec::Bytes(request_frame), info);
  view.observer->on_request(request_ctx);

  codec::AddPartitionsToTxnResponse response;
  response.results_by_topic_v3_and_below.resize(1);
  response.results_by_topic_v3_and_below[0].name = "out";
  response.results_by_topic_v3_and_below[0].results_by_partition.resize(1);
  auto response_frame = kproxy::testing::encoded_response_frame(response, 3, 77);
  const int16_t api = codec::AddPartitionsToTxnResponse::kApiKey;
  stage::ResponseContext response_ctx(api, 3, codec::response_header_version(api, 3), codec::Bytes(response_frame), info);
  view.observer->on_response(response_ctx, std::chrono::milliseconds(1));
}

}  // namespace

TEST_CASE("process services: per-frame metrics count what the observer sees; metrics.frames: false leaves the observer out") {
  auto on = config_with("");
  services::ProcessServices with_frames(*on);
  REQUIRE(with_frames.view().observer != nullptr);
  observe_metadata_error(with_frames.view(), 0);
  CHECK(with_frames.metrics().responses_total(kMetadata) == 1);
  CHECK(with_frames.metrics().errors_total(kMetadata, 3) == 1);

  auto off = config_with("metrics: { frames: false }\n");
  services::ProcessServices without_frames(*off);
  REQUIRE(without_frames.view().observer != nullptr);  // never null: one that does nothing
  observe_metadata_error(without_frames.view(), 0);
  CHECK(without_frames.metrics().responses_total(kMetadata) == 0);
  CHECK(without_frames.metrics().errors_total(kMetadata, 3) == 0);
  REQUIRE(without_frames.transactions() != nullptr);  // GET /transactions answers from an empty tracker
  observe_add_partitions(without_frames.view());
  CHECK(without_frames.transactions()->open_transactions().empty());
}

TEST_CASE("process services: metrics.error_codes: false counts responses but not their error codes") {
  auto config = config_with("metrics: { error_codes: false }\n");
  services::ProcessServices s(*config);
  observe_metadata_error(s.view(), 0);
  CHECK(s.metrics().responses_total(kMetadata) == 1);
  CHECK(s.metrics().errors_total(kMetadata, 3) == 0);
}

TEST_CASE("process services: the transaction tracker follows the frames, and is empty with metrics.transactions: false") {
  auto on = config_with("");
  services::ProcessServices tracking(*on);
  observe_add_partitions(tracking.view());
  auto open = tracking.transactions()->open_transactions();
  REQUIRE(open.size() == 1);
  CHECK(open[0].transactional_id == "orders");

  auto off = config_with("metrics: { transactions: false }\n");
  services::ProcessServices not_tracking(*off);
  observe_add_partitions(not_tracking.view());
  REQUIRE(not_tracking.transactions() != nullptr);
  CHECK(not_tracking.transactions()->open_transactions().empty());
  CHECK(not_tracking.metrics().requests_total(codec::AddPartitionsToTxnRequest::kApiKey) == 1);  // frames still counted
}

TEST_CASE("process services: listener slots are named after the config's listeners, then 'runtime'") {
  auto config = config_with("");
  services::ProcessServices s(*config);
  s.metrics().request(0, kMetadata, 12, 10);
  s.metrics().request(1, kMetadata, 12, 10);
  s.metrics().request(2, kMetadata, 12, 10);  // the slot of every listener added at run time
  std::string text = s.metrics().render();
  INFO(text);
  CHECK(text.find("listener=\"a\"") != std::string::npos);
  CHECK(text.find("listener=\"b\"") != std::string::npos);
  CHECK(text.find("listener=\"runtime\"") != std::string::npos);
}

TEST_CASE("process services: the tap's limits come from the tap: section") {
  auto config = config_with("tap: { records: on, max_record_bytes: 64, max_records: 5 }\n");
  services::ProcessServices s(*config);
  tap::TapLimits limits = s.tap().limits();
  CHECK(limits.records);
  CHECK(limits.max_record_bytes == 64);
  CHECK(limits.max_records == 5);

  auto defaults = config_with("");
  services::ProcessServices d(*defaults);
  CHECK_FALSE(d.tap().limits().records);
  CHECK(d.tap().limits().max_record_bytes == 256);
}
