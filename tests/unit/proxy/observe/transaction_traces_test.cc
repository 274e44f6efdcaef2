// Transactions as traces: the spans of one ended transaction (root and children, their ids, times,
// attributes and statuses), and tracing end to end: tracker -> exporter -> an HTTP listener, with
// the kproxy_trace_* metrics.
#include "proxy/observe/transaction_traces.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <thread>

#include "codec/generated/error_code.h"
#include "tests/unit/support/text.h"
#include "tests/unit/support/tiny_http_server.h"

using namespace kproxy;
using namespace kproxy::observe;
using namespace std::chrono_literals;
using kproxy::codec::ErrorCode;
using kproxy::testing::contains;
using kproxy::testing::TinyHttpServer;

namespace {

/// The attributes of a span, as text (integers printed).
std::map<std::string, std::string> attrs(const Span& s) {
  std::map<std::string, std::string> out;
  for (const auto& a : s.attributes) {
    if (const auto* t = std::get_if<std::string>(&a.value)) out[a.key] = *t;
    else out[a.key] = std::to_string(std::get<int64_t>(a.value));
  }
  return out;
}

/// Span ids 1, 2, 3, ... in the last byte.
struct Counter {
  uint8_t next = 0;
  SpanId operator()() {
    SpanId id{};
    id[7] = ++next;
    return id;
  }
};

TxnClock::time_point at(std::chrono::milliseconds ms) { return TxnClock::time_point{} + ms; }

}  // namespace

TEST_CASE("transaction traces: a root span for the transaction and a child per request, in one trace") {
  TransactionRecord t;
  t.transactional_id = "orders";
  t.producer_id = 42;
  t.producer_epoch = 3;
  t.begin = at(1000ms);
  t.end = at(1250ms);
  t.outcome = TxnOutcome::kCommitted;
  t.partitions = {{"out", 0}, {"out", 1}};
  t.records = 100;
  t.retries = 1;
  t.client_id = "app-1";
  t.listener = "kafka";
  t.transaction_version = 2;
  std::vector<TxnRequestSpan> requests;
  requests.push_back({TxnApi::kProduce, 11, at(1000ms), at(1010ms), 0, "", 7, 2, 100});
  requests.push_back(
      {TxnApi::kEndTxn, 5, at(1200ms), at(1201ms), static_cast<int16_t>(ErrorCode::kConcurrentTransactions), "endtxn-busy", 3, 0, 0});
  requests.push_back({TxnApi::kEndTxn, 5, at(1240ms), at(1250ms), 0, "", 3, 0, 0});
  TraceId trace{};
  trace.fill(0x5a);
  auto spans = transaction_spans(t, requests, 0, trace, Counter{}, std::chrono::nanoseconds(1'700'000'000'000'000'000LL));

  REQUIRE(spans.size() == 4);
  const Span& root = spans[0];
  CHECK(root.name == "transaction orders");
  CHECK(root.trace_id == trace);
  CHECK(root.span_id[7] == 1);
  CHECK(root.parent_span_id == SpanId{});
  CHECK(root.start_unix_nano == 1'700'000'001'000'000'000ULL);
  CHECK(root.end_unix_nano == 1'700'000'001'250'000'000ULL);
  CHECK_FALSE(root.error);
  auto ra = attrs(root);
  CHECK(ra["kafka.transactional_id"] == "orders");
  CHECK(ra["kafka.producer_id"] == "42");
  CHECK(ra["kafka.producer_epoch"] == "3");
  CHECK(ra["kproxy.transaction.outcome"] == "committed");
  CHECK(ra.count("kproxy.transaction.cause") == 0);
  CHECK(ra["kafka.partitions"] == "2");
  CHECK(ra["kafka.records"] == "100");
  CHECK(ra["kproxy.transaction.retries"] == "1");
  CHECK(ra["kafka.client_id"] == "app-1");
  CHECK(ra["kafka.transaction_version"] == "2");

  for (size_t i = 1; i < spans.size(); ++i) {
    CHECK(spans[i].trace_id == trace);
    CHECK(spans[i].parent_span_id == root.span_id);
    CHECK(spans[i].span_id[7] == i + 1);
  }
  CHECK(spans[1].name == "Produce");
  auto pa = attrs(spans[1]);
  CHECK(pa["kafka.api"] == "Produce");
  CHECK(pa["kafka.api_version"] == "11");
  CHECK(pa["kafka.records"] == "100");
  CHECK(pa["kafka.partitions"] == "2");
  CHECK(pa["kproxy.connection"] == "7");
  CHECK(pa.count("error.type") == 0);
  CHECK_FALSE(spans[1].error);
  CHECK(spans[1].start_unix_nano == 1'700'000'001'000'000'000ULL);
  CHECK(spans[1].end_unix_nano == 1'700'000'001'010'000'000ULL);

  CHECK(spans[2].name == "EndTxn");
  auto ea = attrs(spans[2]);
  CHECK(ea["error.type"] == "CONCURRENT_TRANSACTIONS");
  CHECK(ea["kafka.error_code"] == std::to_string(static_cast<int>(ErrorCode::kConcurrentTransactions)));
  CHECK(ea["kproxy.injected_by"] == "endtxn-busy");
  CHECK(spans[2].error);
  CHECK(spans[2].status_message == "CONCURRENT_TRANSACTIONS");
  CHECK_FALSE(spans[3].error);
  CHECK(attrs(spans[3]).count("kproxy.injected_by") == 0);
}

TEST_CASE("transaction traces: an aborted, a fenced and a timed-out transaction: the root's status and cause") {
  TransactionRecord t;
  t.transactional_id = "x";
  t.begin = at(0ms);
  t.end = at(5ms);
  TraceId trace = random_trace_id();
  SUBCASE("aborted by the application: no error") {
    t.outcome = TxnOutcome::kAborted;
    auto root = transaction_spans(t, {}, 0, trace, Counter{}, {})[0];
    CHECK_FALSE(root.error);
    CHECK(attrs(root)["kproxy.transaction.cause"] == "client");
  }
  SUBCASE("aborted after an injected error: an error, with the cause and its rule") {
    t.outcome = TxnOutcome::kAborted;
    t.cause = TxnError{TxnApi::kProduce, static_cast<int16_t>(ErrorCode::kTransactionAbortable), "abortable", at(2ms)};
    auto root = transaction_spans(t, {}, 0, trace, Counter{}, {})[0];
    CHECK(root.error);
    CHECK(root.status_message == "aborted: TRANSACTION_ABORTABLE");
    CHECK(attrs(root)["kproxy.transaction.cause"] == "TRANSACTION_ABORTABLE");
    CHECK(attrs(root)["kproxy.transaction.cause_injected_by"] == "abortable");
  }
  SUBCASE("fenced by a new instance") {
    t.outcome = TxnOutcome::kFenced;
    t.fenced_by_producer_id = 8;
    t.fenced_by_epoch = 1;
    auto root = transaction_spans(t, {}, 2, trace, Counter{}, {})[0];
    CHECK(root.error);
    CHECK(root.status_message == "fenced: new_producer");
    CHECK(attrs(root)["kproxy.transaction.fenced_by_producer_id"] == "8");
    CHECK(attrs(root)["kproxy.requests_dropped"] == "2");
  }
  SUBCASE("timed out") {
    t.outcome = TxnOutcome::kTimedOut;
    auto root = transaction_spans(t, {}, 0, trace, Counter{}, {})[0];
    CHECK(root.error);
    CHECK(root.status_message == "timed_out");
  }
}

TEST_CASE("transaction traces: random ids are never zero and differ") {
  TraceId a = random_trace_id(), b = random_trace_id();
  CHECK(a != b);
  CHECK(a != TraceId{});
  CHECK(random_span_id() != SpanId{});
}

TEST_CASE("transaction traces: tracing end to end, tracker to an HTTP listener, with the metrics") {
  TinyHttpServer collector(200);
  config::TracingConfig cfg;
  cfg.endpoint = "http://127.0.0.1:" + std::to_string(collector.port()) + "/v1/traces";
  cfg.host = "127.0.0.1";
  cfg.port = collector.port();
  cfg.path = "/v1/traces";
  cfg.service_name = "kproxy-e2e";
  cfg.batch_interval = 20ms;
  auto tracker = std::make_shared<TransactionTracker>();
  metrics::ProxyMetrics m;
  auto exporter = start_transaction_tracing(tracker, cfg, m);

  auto now = TxnClock::now();
  auto request = [&](TxnApi api, int32_t correlation, int16_t error_code = 0, std::string rule = "") {
    TxnRequest r;
    r.api = api;
    r.transactional_id = "e2e";
    r.producer_id = 5;
    r.producer_epoch = 0;
    r.commit = true;
    if (api == TxnApi::kAddPartitionsToTxn) r.partitions = {{"out", 0}};
    tracker->on_request(1, correlation, std::move(r), now);
    now += 2ms;
    TxnResponse resp;
    resp.error_code = error_code;
    resp.injected_by = std::move(rule);
    if (api == TxnApi::kInitProducerId) resp.producer_id = 5;
    tracker->on_response(1, correlation, resp, now);
  };
  request(TxnApi::kInitProducerId, 1);
  request(TxnApi::kAddPartitionsToTxn, 2, static_cast<int16_t>(ErrorCode::kConcurrentTransactions), "apt-busy");
  request(TxnApi::kAddPartitionsToTxn, 3);
  request(TxnApi::kEndTxn, 4);

  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (exporter->stats().exported < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  REQUIRE(exporter->stats().exported == 4);
  exporter->stop();

  auto bodies = collector.bodies();
  REQUIRE(bodies.size() == 1);
  auto j = nlohmann::json::parse(bodies[0]);
  CHECK(j["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"] == "kproxy-e2e");
  const auto& spans = j["resourceSpans"][0]["scopeSpans"][0]["spans"];
  REQUIRE(spans.size() == 4);
  CHECK(spans[0]["name"] == "transaction e2e");
  CHECK(spans[1]["name"] == "AddPartitionsToTxn");
  CHECK(spans[1]["status"]["code"] == 2);
  CHECK(spans[2]["name"] == "AddPartitionsToTxn");
  CHECK(spans[3]["name"] == "EndTxn");
  for (size_t i = 1; i < 4; ++i) {
    CHECK(spans[i]["traceId"] == spans[0]["traceId"]);
    CHECK(spans[i]["parentSpanId"] == spans[0]["spanId"]);
  }
  bool injected = false;
  for (const auto& a : spans[1]["attributes"])
    if (a["key"] == "kproxy.injected_by") injected = a["value"]["stringValue"] == "apt-busy";
  CHECK(injected);

  std::string text = m.render();
  INFO(text);
  CHECK(contains(text, "kproxy_trace_spans_exported_total 4"));
  CHECK(contains(text, "kproxy_trace_spans_dropped_total{reason=\"queue_full\"} 0"));
  CHECK(contains(text, "kproxy_trace_export_failures_total 0"));
  CHECK(contains(text, "kproxy_trace_export_batches_total 1"));
  CHECK(contains(text, "kproxy_trace_queue_spans 0"));
}
