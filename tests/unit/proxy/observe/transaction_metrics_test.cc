// The transaction tracker's metrics, read at scrape time, fed through the frame observer.
#include "proxy/observe/transaction_metrics.h"

#include <doctest/doctest.h>

#include "codec/generated/error_code.h"
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

namespace {

/// The requests of one producer and their answers, straight to a tracker, on a clock the test sets.
struct Producer {
  TransactionTracker& tracker;
  std::string id;
  TxnClock::time_point now;
  int32_t correlation = 0;

  void exchange(TxnRequest r, TxnResponse response = {}) {
    r.transactional_id = id;
    response.api = r.api;
    int32_t c = ++correlation;
    tracker.on_request(1, c, r, now);
    tracker.on_response(1, c, response, now);
  }
  void init(int64_t pid, int32_t timeout_ms) {
    TxnRequest r;
    r.api = TxnApi::kInitProducerId;
    r.transaction_timeout_ms = timeout_ms;
    TxnResponse resp;
    resp.producer_id = pid;
    resp.producer_epoch = 0;
    exchange(r, resp);
  }
  TxnRequest request(TxnApi api, int64_t pid) {
    TxnRequest r;
    r.api = api;
    r.api_version = 3;
    r.producer_id = pid;
    r.producer_epoch = 0;
    return r;
  }
  void add_partition(int64_t pid, TxnResponse resp = {}) {
    TxnRequest r = request(TxnApi::kAddPartitionsToTxn, pid);
    r.partitions = {{"out", 0}};
    exchange(r, resp);
  }
  void produce(int64_t pid, TxnResponse resp) {
    TxnRequest r = request(TxnApi::kProduce, pid);
    r.partitions = {{"out", 0}};
    r.records = 1;
    exchange(r, resp);
  }
  void end(int64_t pid, bool commit) {
    TxnRequest r = request(TxnApi::kEndTxn, pid);
    r.commit = commit;
    exchange(r);
  }
};

/// The value of `series` (name and labels as rendered) in `text`, -1 when absent.
double value_of(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

}  // namespace

TEST_CASE("transaction metrics: the frame observer feeds the tracker, and the metrics read it") {
  metrics::ProxyMetrics m;
  tap::TapHub hub;
  cluster::TopicNames topic_names;
  auto frames = std::make_shared<observe::FrameMetrics>(m, hub, topic_names, std::vector<std::string>{"kafka"});
  export_transaction_metrics(m, std::shared_ptr<TransactionTracker>(frames, &frames->transactions()));
  stage::ConnectionInfo conn{4, "kafka", 0, nullptr, {}};

  auto exchange = [&](const auto& request, int16_t version, int32_t correlation, const auto& response) {
    codec::RequestHeader header;
    auto req = encoded_request_frame(request, version, correlation, "txn-app", header);
    stage::RequestContext rctx(header, req, conn);
    frames->on_request(rctx);
    using R = std::decay_t<decltype(response)>;
    auto resp = encoded_response_frame(response, version, correlation);
    stage::ResponseContext sctx(R::kApiKey, version, codec::response_header_version(R::kApiKey, version), resp, conn);
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

TEST_CASE("transaction metrics: a scrape sweeps first; one past its timeout counts as timed_out, one within it as open with its age") {
  metrics::ProxyMetrics m;
  auto tracker = std::make_shared<TransactionTracker>();
  export_transaction_metrics(m, tracker);
  const auto now = TxnClock::now();
  // Begun an hour ago with a 60 s transaction.timeout.ms: its coordinator has aborted it.
  Producer late{*tracker, "late", now - 1h};
  late.init(1, 60000);
  late.add_partition(1);
  // Begun two minutes ago with a 10 min timeout: still open.
  Producer slow{*tracker, "slow", now - 2min};
  slow.init(2, 600000);
  slow.add_partition(2);
  CHECK(tracker->stats(now - 2min).open == 2);  // nothing has ended it yet: only a sweep does

  std::string text = m.render();
  INFO(text);
  CHECK(value_of(text, R"(kproxy_transactions_total{outcome="timed_out"})") == 1);
  CHECK(value_of(text, R"(kproxy_transactions_total{outcome="aborted"})") == 0);
  CHECK(value_of(text, "kproxy_transactions_open") == 1);
  double age = value_of(text, "kproxy_transaction_oldest_open_seconds");
  CHECK(age >= 120);
  CHECK(age < 600);  // the timed-out one (an hour old) is no longer open
  // A timed-out transaction lasted its timeout.
  CHECK(value_of(text, R"(kproxy_transaction_duration_seconds_sum{outcome="timed_out"})") == 60);
  CHECK(value_of(text, R"(kproxy_transaction_duration_seconds_count{outcome="timed_out"})") == 1);
  CHECK(contains(text, "# TYPE kproxy_transactions_open gauge"));
  CHECK(contains(text, "# TYPE kproxy_transaction_oldest_open_seconds gauge"));
}

TEST_CASE("transaction metrics: aborts by cause and source, fencing and epoch counters") {
  metrics::ProxyMetrics m;
  auto tracker = std::make_shared<TransactionTracker>();
  export_transaction_metrics(m, tracker);
  Producer p{*tracker, "app", TxnClock::now() - 1h};
  p.init(4, 60000);
  // Aborted by the application, no error: cause "client", sent by no rule.
  p.add_partition(4);
  p.end(4, false);
  // Aborted after an error a rule injected.
  p.add_partition(4);
  TxnResponse injected;
  injected.error_code = static_cast<int16_t>(codec::ErrorCode::kTransactionAbortable);
  injected.injected_by = "abortable";
  p.produce(4, injected);
  p.end(4, false);
  // Aborted after the broker's own error.
  p.add_partition(4);
  TxnResponse broker;
  broker.error_code = static_cast<int16_t>(codec::ErrorCode::kTransactionAbortable);
  p.produce(4, broker);
  p.end(4, false);

  std::string text = m.render();
  INFO(text);
  CHECK(contains(text, "# TYPE kproxy_transaction_aborts_total counter"));
  CHECK(value_of(text, R"(kproxy_transaction_aborts_total{cause="client",source="broker"})") == 1);
  CHECK(value_of(text, R"(kproxy_transaction_aborts_total{cause="TRANSACTION_ABORTABLE",source="injected"})") == 1);
  CHECK(value_of(text, R"(kproxy_transaction_aborts_total{cause="TRANSACTION_ABORTABLE",source="broker"})") == 1);
  CHECK(value_of(text, R"(kproxy_transactions_total{outcome="aborted"})") == 3);
  CHECK(value_of(text, "kproxy_transaction_fencing_events_total") == 0);
  CHECK(value_of(text, "kproxy_transaction_epoch_bumps_total") == 0);
  CHECK(value_of(text, "kproxy_transactions_untracked_total") == 0);
  CHECK(contains(text, "# TYPE kproxy_transaction_fencing_events_total counter"));
}

TEST_CASE("transaction metrics: exporting again replaces the families and lets the old tracker go") {
  metrics::ProxyMetrics m;
  auto first = std::make_shared<TransactionTracker>();
  export_transaction_metrics(m, first);
  Producer p{*first, "app", TxnClock::now() - 1h};
  p.init(5, 60000);
  p.add_partition(5);
  p.end(5, true);
  CHECK(value_of(m.render(), R"(kproxy_transactions_total{outcome="committed"})") == 1);

  std::weak_ptr<TransactionTracker> old = first;
  first.reset();
  CHECK_FALSE(old.expired());  // the metrics keep it alive
  export_transaction_metrics(m, std::make_shared<TransactionTracker>());
  CHECK(old.expired());
  std::string text = m.render();
  INFO(text);
  CHECK(value_of(text, R"(kproxy_transactions_total{outcome="committed"})") == 0);
  // One family of each name: replaced, not added twice.
  size_t families = 0;
  for (size_t at = 0; (at = text.find("# TYPE kproxy_transactions_total ", at)) != std::string::npos; ++at) ++families;
  CHECK(families == 1);
}
