#include "proxy/observe/transaction_metrics.h"

#include <array>
#include <chrono>
#include <string>
#include <vector>

namespace kproxy::observe {

namespace {

using Reading = metrics::ProxyMetrics::Reading;
using ReadType = metrics::ProxyMetrics::ReadType;

/// The tracker's stats after a sweep, as of now.
TransactionStats current(TransactionTracker& tracker) {
  auto now = tracker.clock().now();
  tracker.sweep(now);
  return tracker.stats(now);
}

std::vector<Reading> one(double value) { return {Reading{{}, value}}; }

/// The outcomes of ended transactions, each exported even at 0.
constexpr std::array<TxnOutcome, 5> kEnded = {TxnOutcome::kCommitted, TxnOutcome::kAborted, TxnOutcome::kFenced, TxnOutcome::kTimedOut,
                                              TxnOutcome::kUnknown};

}  // namespace

void export_transaction_metrics(metrics::ProxyMetrics& metrics, std::shared_ptr<TransactionTracker> tracker) {
  metrics.add_family_reader("kproxy_transactions_total",
                            "Transactions seen to end, by outcome (committed, aborted, fenced, timed_out, unknown).", ReadType::kCounter,
                            {"outcome"}, [tracker] {
                              auto s = current(*tracker);
                              std::vector<Reading> out;
                              for (TxnOutcome o : kEnded)
                                out.push_back({{std::string(txn_outcome_name(o))}, static_cast<double>(s.ended[o])});
                              return out;
                            });
  metrics.add_family_reader("kproxy_transaction_aborts_total",
                            "Aborted and fenced transactions by cause: the first error that was not a retry (or, when there was "
                            "none, client for an abort, new_producer for a fencing by a new instance), and whether a fault rule injected "
                            "it (source injected) or the broker sent it.",
                            ReadType::kCounter, {"cause", "source"}, [tracker] {
                              auto s = current(*tracker);
                              std::vector<Reading> out;
                              for (const auto& [key, n] : s.abort_causes)
                                out.push_back({{key.first, key.second ? "injected" : "broker"}, static_cast<double>(n)});
                              return out;
                            });
  std::vector<double> bounds;
  for (int64_t ms : kTxnDurationBoundsMs) bounds.push_back(static_cast<double>(ms) / 1000.0);
  metrics.add_histogram_reader(
      "kproxy_transaction_duration_seconds",
      "How long transactions lasted, from their first AddPartitionsToTxn or transactional Produce to their end, by outcome "
      "(a timed_out one: its transaction.timeout.ms).",
      {"outcome"}, std::move(bounds), [tracker] {
        auto s = current(*tracker);
        std::vector<metrics::ProxyMetrics::HistogramReading> out;
        for (TxnOutcome o : kEnded) {
          const TxnDurations& d = s.durations[o];
          out.push_back({{std::string(txn_outcome_name(o))},
                         std::vector<uint64_t>(d.buckets.begin(), d.buckets.end()),
                         std::chrono::duration<double>(d.sum).count()});
        }
        return out;
      });
  metrics.add_family_reader("kproxy_transactions_open", "Transactions open now.", ReadType::kGauge, {},
                            [tracker] { return one(static_cast<double>(current(*tracker).open)); });
  metrics.add_family_reader("kproxy_transaction_oldest_open_seconds",
                            "Age of the oldest open transaction (0 when none): a hanging transaction blocks read_committed "
                            "consumers of its partitions (KIP-664).",
                            ReadType::kGauge, {},
                            [tracker] { return one(std::chrono::duration<double>(current(*tracker).oldest_open_age).count()); });
  metrics.add_family_reader("kproxy_transaction_epoch_bumps_total", "Producer epochs raised outside EndTxn (KIP-360 bumps).",
                            ReadType::kCounter, {}, [tracker] { return one(static_cast<double>(current(*tracker).epoch_bumps)); });
  metrics.add_family_reader("kproxy_transaction_fencing_events_total",
                            "Producers fenced: a new instance took the transactional.id, or (when kproxy did not see that) "
                            "PRODUCER_FENCED / INVALID_PRODUCER_EPOCH; once per fencing.",
                            ReadType::kCounter, {}, [tracker] { return one(static_cast<double>(current(*tracker).fencing_events)); });
  metrics.add_family_reader("kproxy_transactions_untracked_total",
                            "Transaction events of transactional.ids beyond the tracker's bound (not reconstructed).", ReadType::kCounter,
                            {}, [tracker] { return one(static_cast<double>(current(*tracker).untracked)); });
}

}  // namespace kproxy::observe
