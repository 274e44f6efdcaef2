// Transactions as OpenTelemetry traces (docs/transactions.md "Traces"): one trace per transaction,
// a root span "transaction <transactional.id>" from its begin to its end, and a child span per
// request of it (AddPartitionsToTxn, Produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, and an
// InitProducerId that ended it), from the request to its answer.
//
//   TransactionTracker ──trace hook (the transaction ended: record + its requests)──►
//       transaction_spans ──► TraceExporter::try_push ──► exporter thread ──► OTLP/HTTP collector
//
// Only with a `tracing:` section: without it the tracker keeps no requests and nothing here runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "config/config.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/observe/trace_exporter.h"
#include "proxy/observe/transaction_tracker.h"

namespace kproxy::observe {

/// The spans of one ended transaction: the root first, then one child per request, all in
/// trace `trace`, span ids from `next_id`. `unix_offset` turns a TxnClock time into Unix time
/// (system_clock minus steady_clock, read when the transaction ended).
std::vector<Span> transaction_spans(const TransactionRecord& t, const std::vector<TxnRequestSpan>& requests, uint32_t requests_dropped,
                                    const TraceId& trace, const std::function<SpanId()>& next_id, std::chrono::nanoseconds unix_offset);

/// A random trace id / span id (never all zero), from a per-thread generator.
TraceId random_trace_id();
SpanId random_span_id();

/// Tracing as `config` says: an exporter (started) fed by `tracker`'s trace hook, its thread
/// sweeping the tracker every batch interval (so that a transaction that times out is exported
/// without a scrape), and the kproxy_trace_* metrics registered with `metrics`. Call stop() on
/// the result when kproxy stops (it flushes within tracing.timeout).
std::shared_ptr<TraceExporter> start_transaction_tracing(const std::shared_ptr<TransactionTracker>& tracker,
                                                         const config::TracingConfig& config, metrics::ProxyMetrics& metrics);

}  // namespace kproxy::observe
