// The transaction tracker's figures as metrics (docs/transactions.md, docs/metrics.md): read at
// scrape time, no transactional.id label (bounded cardinality).
//
//   kproxy_transactions_total{outcome}                 committed, aborted, fenced, timed_out, unknown
//   kproxy_transaction_aborts_total{cause,source}      aborted and fenced ones: the first error that was
//                                                      not a retry (or "client" / "new_producer"), injected by a rule or
//                                                      sent by the broker
//   kproxy_transaction_duration_seconds{outcome}      histogram (5 ms .. 120 s) of the ended ones, begin to end
//   kproxy_transactions_open                           open now
//   kproxy_transaction_oldest_open_seconds             age of the oldest open one (hanging transactions, KIP-664)
//   kproxy_transaction_epoch_bumps_total               a producer's epoch went up outside EndTxn
//   kproxy_transaction_fencing_events_total            a producer was fenced (once per fencing)
//   kproxy_transactions_untracked_total                events of ids beyond the tracker's bound
#pragma once

#include <memory>

#include "proxy/metrics/proxy_metrics.h"
#include "proxy/observe/transaction_tracker.h"

namespace kproxy::observe {

/// Registers the families above with `metrics`, read from `tracker` (kept alive by them until
/// another call replaces them). Each scrape first sweeps the tracker (timeouts).
void export_transaction_metrics(metrics::ProxyMetrics& metrics, std::shared_ptr<TransactionTracker> tracker);

}  // namespace kproxy::observe
