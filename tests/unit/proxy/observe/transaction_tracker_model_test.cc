// The transaction tracker against a reference model (tests/unit/support/txn_model.h): producers
// run transactions on both transaction protocols against a model coordinator while every fault
// action kproxy has falls on random exchanges (lost and held answers, closes before forwarding,
// rewritten errors, kproxy's own answers, refusals, new instances of the id); the tracker's
// outcomes must equal each producer's own account. Seeded and bounded; the fuzz target
// tests/fuzz/txn_model_fuzzer.cc runs the same model on the fuzzer's choices.
#include <deque>
#include <map>
#include <random>

#include <doctest/doctest.h>

#include "codec/generated/messages/add_partitions_to_txn.h"
#include "codec/generated/messages/end_txn.h"
#include "codec/generated/messages/init_producer_id.h"
#include "codec/generated/messages/produce.h"
#include "codec/response_header.h"
#include "proxy/observe/frame_metrics.h"
#include "proxy/observe/transaction_events.h"
#include "tests/unit/support/frames.h"
#include "tests/unit/support/record_batch.h"
#include "tests/unit/support/txn_model.h"

using namespace kproxy;
using namespace kproxy::testing::txn_model;
using kproxy::testing::encoded_request_frame;
using kproxy::testing::encoded_response_frame;

namespace {

/// Hands the exchanges to the frame observer (FrameMetrics) as the pipeline does: encoded
/// request and response frames, closes before forwarding, kproxy's own answers, error rules
/// that rewrite the decoded response, and withheld answers.
class ObserverSink final : public TxnSink {
 public:
  explicit ObserverSink(observe::FrameMetrics& observer) : observer_(observer) {}

  void request(const Exchange& x, Fault fault) override {
    codec::RequestHeader header;
    std::vector<uint8_t>& frame = frames_.emplace_back(encode_request(x, header));
    stage::RequestContext ctx(header, frame, connection(x.connection));
    if (fault == Fault::kCloseBefore) ctx.close({net::CloseCategory::kFault, "model: close before forwarding"});
    if (fault == Fault::kAnsweredRetriable || fault == Fault::kAnsweredRefusal) ctx.answer({});
    observer_.on_request(ctx);
  }

  void response(const Exchange& x, Fault fault, const Answer& a) override {
    const bool synthetic = a.broker_code < 0;
    std::vector<uint8_t> frame = encode_response(x, synthetic ? a.client_code : a.broker_code, a);
    stage::ExchangeActions actions;
    if (synthetic) actions.injected_by = "model-answer";
    const int16_t key = observe::txn_api_key(x.api);
    stage::ResponseContext ctx(key, x.version, codec::response_header_version(key, x.version), frame, connection(x.connection), actions,
                               synthetic, std::chrono::nanoseconds(0));
    ctx.set_withheld(fault == Fault::kLost);
    if (!synthetic && a.client_code != a.broker_code) {
      // What FaultStage::on_response does for an error rule: the decoded body's codes replaced.
      (void)ctx.scan();  // the broker's bytes, scanned before the rewrite (as the rewrite stage does)
      auto m = ctx.message();
      REQUIRE(m);
      m->for_each_error_code(x.version, [&](int16_t& c, const codec::ErrorScope&) { c = a.client_code; });
      ctx.mark_dirty(stage::StageId::kFaultRules);
    }
    observer_.on_response(ctx, std::chrono::nanoseconds(0));
  }

  void withheld(uint64_t connection_id, int32_t correlation_id) override { observer_.on_response_withheld(connection_id, correlation_id); }
  void closed(uint64_t connection_id) override {
    observer_.on_connection_closed(connection_id);
    connections_.erase(connection_id);
  }

 private:
  stage::ConnectionInfo& connection(uint64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) it = connections_.emplace(id, stage::ConnectionInfo{id, "kafka", 0, nullptr, {}}).first;
    return it->second;
  }

  std::vector<uint8_t> encode_request(const Exchange& x, codec::RequestHeader& header) {
    switch (x.api) {
      case TxnApi::kInitProducerId: {
        codec::InitProducerIdRequest r;
        r.transactional_id = ids_.emplace_back(x.transactional_id);
        r.transaction_timeout_ms = 60000;
        return encoded_request_frame(r, x.version, x.correlation_id, "model", header);
      }
      case TxnApi::kAddPartitionsToTxn: {
        codec::AddPartitionsToTxnRequest r;
        r.v3_and_below_transactional_id = ids_.emplace_back(x.transactional_id);
        r.v3_and_below_producer_id = x.producer_id;
        r.v3_and_below_producer_epoch = x.producer_epoch;
        r.v3_and_below_topics.push_back({"out", {0}, {}});
        return encoded_request_frame(r, x.version, x.correlation_id, "model", header);
      }
      case TxnApi::kProduce: {
        codec::ProduceRequest r;
        r.transactional_id = ids_.emplace_back(x.transactional_id);
        r.acks = -1;
        r.timeout_ms = 30000;
        const std::vector<uint8_t>& records = batches_.emplace_back(kproxy::testing::batch(x.records, x.producer_id, x.producer_epoch));
        codec::ProduceRequest::PartitionProduceData p;
        p.index = 0;
        p.records = codec::Bytes(records.data(), records.size());
        r.topic_data.push_back({"out", {}, {p}, {}});
        return encoded_request_frame(r, x.version, x.correlation_id, "model", header);
      }
      case TxnApi::kEndTxn: {
        codec::EndTxnRequest r;
        r.transactional_id = ids_.emplace_back(x.transactional_id);
        r.producer_id = x.producer_id;
        r.producer_epoch = x.producer_epoch;
        r.committed = x.commit;
        return encoded_request_frame(r, x.version, x.correlation_id, "model", header);
      }
      default: FAIL("the model sends no other API"); return {};
    }
  }

  static std::vector<uint8_t> encode_response(const Exchange& x, int16_t error, const Answer& a) {
    switch (x.api) {
      case TxnApi::kInitProducerId: {
        codec::InitProducerIdResponse r;
        r.error_code = error;
        r.producer_id = a.producer_id;
        r.producer_epoch = a.producer_epoch;
        return encoded_response_frame(r, x.version, x.correlation_id);
      }
      case TxnApi::kAddPartitionsToTxn: {
        codec::AddPartitionsToTxnResponse r;
        r.results_by_topic_v3_and_below.push_back({"out", {{0, error, {}}}, {}});
        return encoded_response_frame(r, x.version, x.correlation_id);
      }
      case TxnApi::kProduce: {
        codec::ProduceResponse r;
        codec::ProduceResponse::PartitionProduceResponse p;
        p.index = 0;
        p.error_code = error;
        r.responses.push_back({"out", {}, {p}, {}});
        return encoded_response_frame(r, x.version, x.correlation_id);
      }
      case TxnApi::kEndTxn: {
        codec::EndTxnResponse r;
        r.error_code = error;
        r.producer_id = a.producer_id;
        r.producer_epoch = a.producer_epoch;
        return encoded_response_frame(r, x.version, x.correlation_id);
      }
      default: FAIL("the model sends no other API"); return {};
    }
  }

  observe::FrameMetrics& observer_;
  std::map<uint64_t, stage::ConnectionInfo> connections_;
  std::deque<std::vector<uint8_t>> frames_, batches_;  ///< the requests' views point into them
  std::deque<std::string> ids_;
};

/// One producer's run: `transactions` transactions under `fault_percent`% faults, seeded.
std::vector<TxnOutcome> run(TxnSink& sink, bool tv2, const std::string& id, uint32_t seed, int transactions, uint32_t fault_percent) {
  std::mt19937 rng(seed);
  Coordinator coordinator;
  coordinator.tv2 = tv2;
  Producer producer(
      tv2, id, coordinator, sink, [&rng](uint32_t bound) { return static_cast<uint32_t>(rng() % bound); }, fault_percent);
  producer.init();
  for (int i = 0; i < transactions; ++i) producer.transaction();
  return producer.account();
}

std::string names(const std::vector<TxnOutcome>& outcomes) {
  std::string out;
  for (TxnOutcome o : outcomes) out += std::string(observe::txn_outcome_name(o)) + " ";
  return out;
}

}  // namespace

TEST_CASE("transaction tracker model: the tracker's outcomes equal each producer's account under random faults (tracker events)") {
  // 2 x 400 seeded producers of 40 transactions each, straight into the tracker.
  int compared = 0, transactions = 0;
  for (bool tv2 : {false, true}) {
    for (uint32_t seed = 1; seed <= 400; ++seed) {
      observe::TransactionTracker::Limits limits;
      limits.history_per_id = 100;
      observe::TransactionTracker tracker(limits);
      TrackerSink sink(tracker);
      const std::string id = "model-" + std::to_string(seed);
      auto expected = run(sink, tv2, id, seed, 40, 35);
      auto tracked = tracked_outcomes(tracker, id);
      INFO("tv2=" << tv2 << " seed=" << seed << "\n expected: " << names(expected) << "\n tracked:  " << names(tracked));
      REQUIRE(tracked == expected);
      ++compared;
      transactions += static_cast<int>(expected.size());
    }
  }
  CHECK(compared == 800);
  CHECK(transactions == 800 * 40);
}

TEST_CASE("transaction tracker model: the same through the frame observer, as encoded frames") {
  // The frame observer keeps its own tracker (16 ended transactions per id): each seed its own id.
  metrics::ProxyMetrics proxy_metrics;
  tap::TapHub hub;
  cluster::TopicNames topic_names;
  observe::FrameMetrics observer(proxy_metrics, hub, topic_names, {"kafka"});
  ObserverSink sink(observer);
  int compared = 0;
  std::map<TxnOutcome, uint64_t> expected_counts;
  for (bool tv2 : {false, true}) {
    for (uint32_t seed = 1; seed <= 60; ++seed) {
      const std::string id = std::string(tv2 ? "tv2-" : "tv1-") + std::to_string(seed);
      auto expected = run(sink, tv2, id, 1000 + seed, 14, 35);
      auto tracked = tracked_outcomes(observer.transactions(), id);
      INFO("tv2=" << tv2 << " seed=" << seed << "\n expected: " << names(expected) << "\n tracked:  " << names(tracked));
      REQUIRE(tracked == expected);
      for (TxnOutcome o : expected) ++expected_counts[o];
      ++compared;
    }
  }
  CHECK(compared == 120);
  // The metrics' counts (kproxy_transactions_total) agree as well.
  auto stats = observer.transactions().stats(observe::TxnClock::now());
  for (auto [outcome, n] : expected_counts) {
    CAPTURE(observe::txn_outcome_name(outcome));
    CHECK(stats.ended[outcome] == n);
  }
  CHECK(stats.open == 0);
}
