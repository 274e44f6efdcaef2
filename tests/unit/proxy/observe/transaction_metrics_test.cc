// The transaction tracker's metrics, read at scrape time, fed through the frame observer.
#include "proxy/observe/transaction_metrics.h"

#include <doctest/doctest.h>

#include "codec/generated/messages/add_partitions_to_txn.h"
#include "codec/generated/messages/end_txn.h"
#include "codec/generated/messages/init_producer_id.h"
#include "proxy/observe/frame_metrics.h"
#include "tests/unit/support/frames.h"
#include "tests/unit/support/text.h"

using namespace kproxy;
using namespace kproxy::observe;
using namespace std::chrono_literals;
using kproxy::testing::contains;
using kproxy::testing::encoded_request_frame;
using kproxy::testing::encoded_response_frame;

TEST_CASE("transaction metrics: the frame observer feeds the tracker, and the metrics read it") {
  metrics::ProxyMetrics m;
  tap::TapHub hub;
  proxy::TopicNames topic_names;
  auto frames = std::make_shared<metrics::FrameMetrics>(m, hub, topic_names, std::vector<std::string>{"kafka"});
  export_transaction_metrics(m, std::shared_ptr<TransactionTracker>(frames, &frames->transactions()));
  proxy::ConnectionInfo conn{4, "kafka", 0, nullptr, {}};

  auto exchange = [&](const auto& request, int16_t version, int32_t correlation, const auto& response) {
    codec::RequestHeader header;
    auto req = encoded_request_frame(request, version, correlation, "txn-app", header);
    proxy::RequestContext rctx(header, req, conn);
    frames->on_request(rctx);
    using R = std::decay_t<decltype(response)>;
    auto resp = encoded_response_frame(response, version, correlation);
    proxy::ResponseContext sctx(R::kApiKey, version, codec::response_header_version(R::kApiKey, version), resp, conn);
    frames->on_response(sctx, std::chrono::milliseconds(1));
  };
  codec::InitProducerIdRequest init;
  init.transactional_id = "orders";
  codec::InitProducerIdResponse init_ok;
  init_ok.producer_id = 9;
  exchange(init, 4, 1, init_ok);
  codec::AddPartitionsToTxnRequest add;
  add.v3_and_below_transactional_id = "orders";
  add.v3_and_below_producer_id = 9;
  add.v3_and_below_topics.emplace_back().name = "out";
  add.v3_and_below_topics[0].partitions = {0};
  exchange(add, 3, 2, codec::AddPartitionsToTxnResponse{});
  CHECK(contains(m.render(), "kproxy_transactions_open 1"));
  codec::EndTxnRequest end;
  end.transactional_id = "orders";
  end.producer_id = 9;
  end.committed = true;
  exchange(end, 3, 3, codec::EndTxnResponse{});

  auto h = frames->transactions().history("orders");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kCommitted);
  CHECK(h[0].transaction_version == 1);
  std::string text = m.render();
  INFO(text);
  CHECK(contains(text, "# TYPE kproxy_transactions_total counter"));
  CHECK(contains(text, "kproxy_transactions_total{outcome=\"committed\"} 1"));
  CHECK(contains(text, "kproxy_transactions_total{outcome=\"aborted\"} 0"));
  CHECK(contains(text, "kproxy_transactions_open 0"));
  CHECK(contains(text, "kproxy_transaction_oldest_open_seconds 0"));
  CHECK(contains(text, "kproxy_transaction_fencing_events_total 0"));
}

TEST_CASE("transaction metrics: kproxy_transaction_duration_seconds is a histogram per outcome with exact bucket counts") {
  metrics::ProxyMetrics m;
  auto tracker = std::make_shared<TransactionTracker>();
  export_transaction_metrics(m, tracker);
  // Transactions of "app" from their AddPartitionsToTxn request to their EndTxn response, on a
  // clock in the past (the scrape's sweep, at the real now, finds nothing open to end).
  auto now = TxnClock::now() - 1h;
  int32_t correlation = 0;
  auto transaction = [&](std::chrono::milliseconds lasting, bool commit) {
    TxnRequest add;
    add.api = TxnApi::kAddPartitionsToTxn;
    add.transactional_id = "app";
    add.producer_id = 3;
    add.producer_epoch = 0;
    add.partitions = {{"out", 0}};
    tracker->on_request(1, ++correlation, add, now);
    tracker->on_response(1, correlation, TxnResponse{}, now);
    TxnRequest end = add;
    end.api = TxnApi::kEndTxn;
    end.commit = commit;
    end.partitions.clear();
    tracker->on_request(1, ++correlation, end, now + lasting);
    tracker->on_response(1, correlation, TxnResponse{}, now + lasting);
    now += lasting + 1s;
  };
  transaction(5ms, true);
  transaction(7ms, true);
  transaction(3s, false);

  std::string text = m.render();
  INFO(text);
  CHECK(contains(text, "# TYPE kproxy_transaction_duration_seconds histogram"));
  CHECK(contains(text, "kproxy_transaction_duration_seconds_bucket{outcome=\"committed\",le=\"0.005\"} 1\n"));
  CHECK(contains(text, "kproxy_transaction_duration_seconds_bucket{outcome=\"committed\",le=\"0.01\"} 2\n"));
  CHECK(contains(text, "kproxy_transaction_duration_seconds_bucket{outcome=\"committed\",le=\"120\"} 2\n"));
  CHECK(contains(text, "kproxy_transaction_duration_seconds_bucket{outcome=\"committed\",le=\"+Inf\"} 2\n"));
  CHECK(contains(text, "kproxy_transaction_duration_seconds_count{outcome=\"committed\"} 2\n"));
  CHECK(contains(text, "kproxy_transaction_duration_seconds_sum{outcome=\"committed\"} 0.012\n"));
  CHECK(contains(text, "kproxy_transaction_duration_seconds_bucket{outcome=\"aborted\",le=\"2.5\"} 0\n"));
  CHECK(contains(text, "kproxy_transaction_duration_seconds_bucket{outcome=\"aborted\",le=\"5\"} 1\n"));
  CHECK(contains(text, "kproxy_transaction_duration_seconds_sum{outcome=\"aborted\"} 3\n"));
  // Every outcome has its series, empty ones too (so a dashboard's query has data from the start).
  for (const char* o : {"fenced", "timed_out", "unknown"}) {
    CHECK(contains(text, std::string("kproxy_transaction_duration_seconds_count{outcome=\"") + o + "\"} 0\n"));
    CHECK(contains(text, std::string("kproxy_transaction_duration_seconds_bucket{outcome=\"") + o + "\",le=\"+Inf\"} 0\n"));
  }
  // Its count agrees with kproxy_transactions_total.
  CHECK(contains(text, "kproxy_transactions_total{outcome=\"committed\"} 2\n"));
  CHECK(contains(text, "kproxy_transactions_total{outcome=\"aborted\"} 1\n"));
}
