#include "proxy/observe/transaction_traces.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <string>

#include <spdlog/spdlog.h>

#include "codec/generated/error_code.h"

namespace kproxy::observe {

namespace {

uint64_t unix_nanos(TxnClock::time_point at, std::chrono::nanoseconds unix_offset) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()) + unix_offset;
  return ns.count() < 0 ? 0 : static_cast<uint64_t>(ns.count());
}

std::mt19937_64& generator() {
  thread_local std::mt19937_64 g([] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }());
  return g;
}

template <size_t N>
std::array<uint8_t, N> random_id() {
  std::array<uint8_t, N> id{};
  do {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t r = generator()();
      for (size_t k = 0; k < 8 && i + k < N; ++k) id[i + k] = static_cast<uint8_t>(r >> (8 * k));
    }
  } while (std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; }));
  return id;
}

SpanAttribute text(std::string key, std::string value) { return {std::move(key), std::move(value)}; }
SpanAttribute number(std::string key, int64_t value) { return {std::move(key), value}; }

}  // namespace

TraceId random_trace_id() { return random_id<16>(); }
SpanId random_span_id() { return random_id<8>(); }

std::vector<Span> transaction_spans(const TransactionRecord& t, const std::vector<TxnRequestSpan>& requests, uint32_t requests_dropped,
                                    const TraceId& trace, const std::function<SpanId()>& next_id, std::chrono::nanoseconds unix_offset) {
  std::vector<Span> out;
  out.reserve(requests.size() + 1);
  Span root;
  root.trace_id = trace;
  root.span_id = next_id();
  root.name = "transaction " + t.transactional_id;
  root.start_unix_nano = unix_nanos(t.begin, unix_offset);
  root.end_unix_nano = unix_nanos(t.end, unix_offset);
  auto& a = root.attributes;
  a.push_back(text("kafka.transactional_id", t.transactional_id));
  a.push_back(number("kafka.producer_id", t.producer_id));
  a.push_back(number("kafka.producer_epoch", t.producer_epoch));
  a.push_back(text("kproxy.transaction.outcome", std::string(txn_outcome_name(t.outcome))));
  const bool ended_badly = t.outcome == TxnOutcome::kAborted || t.outcome == TxnOutcome::kFenced;
  std::string cause;
  if (t.cause) cause = codec::error_name(t.cause->error_code);
  else if (ended_badly) cause = t.outcome == TxnOutcome::kFenced ? "new_producer" : "client";
  if (!cause.empty()) a.push_back(text("kproxy.transaction.cause", cause));
  if (t.cause && !t.cause->injected_by.empty()) a.push_back(text("kproxy.transaction.cause_injected_by", t.cause->injected_by));
  a.push_back(number("kafka.partitions", static_cast<int64_t>(t.partitions.size() + t.partitions_dropped)));
  a.push_back(number("kafka.records", static_cast<int64_t>(t.records)));
  a.push_back(number("kafka.bytes", static_cast<int64_t>(t.bytes)));
  if (!t.groups.empty()) a.push_back(number("kafka.consumer_groups", static_cast<int64_t>(t.groups.size())));
  if (t.transaction_version > 0) a.push_back(number("kafka.transaction_version", t.transaction_version));
  if (t.retries > 0) a.push_back(number("kproxy.transaction.retries", t.retries));
  if (!t.client_id.empty()) a.push_back(text("kafka.client_id", t.client_id));
  if (!t.listener.empty()) a.push_back(text("kproxy.listener", t.listener));
  if (t.fenced_by_producer_id >= 0) {
    a.push_back(number("kproxy.transaction.fenced_by_producer_id", t.fenced_by_producer_id));
    a.push_back(number("kproxy.transaction.fenced_by_epoch", t.fenced_by_epoch));
  }
  if (requests_dropped > 0) a.push_back(number("kproxy.requests_dropped", requests_dropped));
  // Committed, or aborted by the application: no error. Anything else is one.
  if (t.outcome == TxnOutcome::kFenced || t.outcome == TxnOutcome::kTimedOut || t.outcome == TxnOutcome::kUnknown ||
      (t.outcome == TxnOutcome::kAborted && t.cause)) {
    root.error = true;
    root.status_message = std::string(txn_outcome_name(t.outcome)) + (cause.empty() ? "" : ": " + cause);
  }
  out.push_back(std::move(root));

  for (const TxnRequestSpan& r : requests) {
    Span s;
    s.trace_id = trace;
    s.span_id = next_id();
    s.parent_span_id = out.front().span_id;
    s.name = std::string(txn_api_name(r.api));
    s.start_unix_nano = unix_nanos(r.sent, unix_offset);
    s.end_unix_nano = unix_nanos(r.answered, unix_offset);
    s.attributes.push_back(text("kafka.api", s.name));
    s.attributes.push_back(number("kafka.api_version", r.api_version));
    s.attributes.push_back(number("kproxy.connection", static_cast<int64_t>(r.connection)));
    if (r.partitions > 0) s.attributes.push_back(number("kafka.partitions", r.partitions));
    if (r.api == TxnApi::kProduce) s.attributes.push_back(number("kafka.records", static_cast<int64_t>(r.records)));
    if (r.error_code != 0) {
      std::string name = codec::error_name(r.error_code);
      s.attributes.push_back(text("error.type", name));
      s.attributes.push_back(number("kafka.error_code", r.error_code));
      s.error = true;
      s.status_message = name;
    }
    if (!r.injected_by.empty()) s.attributes.push_back(text("kproxy.injected_by", r.injected_by));
    out.push_back(std::move(s));
  }
  return out;
}

std::shared_ptr<TraceExporter> start_transaction_tracing(const std::shared_ptr<TransactionTracker>& tracker,
                                                         const config::TracingConfig& config, metrics::ProxyMetrics& metrics) {
  TraceExporterOptions options;
  options.target = HttpTarget{config.host, config.port, config.path};
  options.service_name = config.service_name;
  options.max_queue_spans = config.max_queue_spans;
  options.batch_max_spans = config.batch_max_spans;
  options.batch_interval = config.batch_interval;
  options.timeout = config.timeout;
  // The tracker holds the exporter (its hook); the exporter's thread only looks the tracker up.
  options.tick = [weak = std::weak_ptr<TransactionTracker>(tracker)] {
    if (auto t = weak.lock()) t->sweep(t->clock().now());
  };
  auto exporter = std::make_shared<TraceExporter>(std::move(options));
  auto requests_dropped = std::make_shared<std::atomic<uint64_t>>(0);

  tracker->set_trace_hook(
      [exporter, requests_dropped, clock = &tracker->clock()](const TransactionRecord& t, std::vector<TxnRequestSpan>&& requests,
                                                              uint32_t dropped) {
        if (dropped > 0) requests_dropped->fetch_add(dropped, std::memory_order_relaxed);
        auto unix_offset = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()) -
                           std::chrono::duration_cast<std::chrono::nanoseconds>(clock->now().time_since_epoch());
        exporter->try_push(transaction_spans(t, requests, dropped, random_trace_id(), random_span_id, unix_offset));
      },
      config.max_spans_per_transaction);

  using Reading = metrics::ProxyMetrics::Reading;
  using ReadType = metrics::ProxyMetrics::ReadType;
  std::weak_ptr<TraceExporter> weak = exporter;
  auto read = [weak](auto field) {
    return [weak, field] {
      auto e = weak.lock();
      return std::vector<Reading>{Reading{{}, e ? static_cast<double>(field(e->stats())) : 0.0}};
    };
  };
  metrics.add_family_reader("kproxy_trace_spans_exported_total", "Spans the trace collector accepted (tracing:).", ReadType::kCounter, {},
                            read([](const TraceExporterStats& s) { return s.exported; }));
  metrics.add_family_reader(
      "kproxy_trace_spans_dropped_total",
      "Spans not exported, by reason: queue_full (the collector was slow or down and the queue was full: a transaction's spans are "
      "dropped together, a worker never waits), export_failed (the collector refused a batch or did not answer in tracing.timeout), "
      "shutdown (still queued when kproxy stopped), per_transaction_limit (requests past tracing.max_spans_per_transaction).",
      ReadType::kCounter, {"reason"}, [weak, requests_dropped] {
        TraceExporterStats s;
        if (auto e = weak.lock()) s = e->stats();
        return std::vector<Reading>{{{"queue_full"}, static_cast<double>(s.dropped_queue_full)},
                                    {{"export_failed"}, static_cast<double>(s.dropped_export_failed)},
                                    {{"shutdown"}, static_cast<double>(s.dropped_shutdown)},
                                    {{"per_transaction_limit"}, static_cast<double>(requests_dropped->load(std::memory_order_relaxed))}};
      });
  metrics.add_family_reader("kproxy_trace_export_failures_total",
                            "POSTs to the trace collector that failed (refused, not answered in tracing.timeout, or unreachable).",
                            ReadType::kCounter, {}, read([](const TraceExporterStats& s) { return s.export_failures; }));
  metrics.add_family_reader("kproxy_trace_export_batches_total", "Batches of spans the trace collector accepted.", ReadType::kCounter, {},
                            read([](const TraceExporterStats& s) { return s.batches; }));
  metrics.add_family_reader("kproxy_trace_queue_spans", "Spans waiting for the trace exporter's thread.", ReadType::kGauge, {},
                            read([](const TraceExporterStats& s) { return s.queued; }));

  exporter->start();
  spdlog::info("tracing: transactions are exported to {} as service '{}' (queue {} spans, batches of {} or every {} ms)", config.endpoint,
               config.service_name, config.max_queue_spans, config.batch_max_spans, config.batch_interval.count());
  return exporter;
}

}  // namespace kproxy::observe
