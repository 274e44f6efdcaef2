// FrameMetrics: the pipeline's FrameObserver that feeds ProxyMetrics and the tap. (The
// per-connection part, gauges that must come down when a connection closes, is
// ConnectionMetrics: proxy/metrics/connection_metrics.h.)
//
//   Pipeline ──on_request/on_response/on_fault_injected──► FrameMetrics ──► ProxyMetrics (shard)
//                                                                   └─────► TapHub (only when someone listens)
//   ClientConnection ──opened/upstream_connected/inflight/closed──► ConnectionMetrics ──► ProxyMetrics
//
// Responses' error codes come from the frame's scan (codec::scan_response: no decode, no
// allocation, made once per frame and shared with the broker-address rewrite); a body is decoded
// only when a stage changed it or the tap wants it, requests only when the tap wants them.
// Counters are indexed by the connection's listener index and api key: nothing is looked up by
// name per frame. The opt-in topic / client id labels (metrics.topic_labels, client_id_labels)
// cost a request decode and a per-thread hash lookup, only when turned on.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proxy/cluster/topic_names.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/observe/transaction_tracker.h"
#include "proxy/stage/frame_observer.h"
#include "proxy/stage/stage.h"
#include "proxy/tap/tap_hub.h"

namespace kproxy::observe {

class FrameMetrics final : public stage::FrameObserver {
 public:
  /// `topic_names`: names topics that requests name by id only (opt-in topic label, the
  /// tracker's partitions). `count_errors` false (metrics.error_codes: false) skips decoding
  /// responses for their error codes (cost attribution in bench/metrics); `track_transactions`
  /// false (metrics.transactions: false) leaves the transaction APIs and transactional Produce
  /// undecoded, the tracker empty (cost attribution in bench/proxy).
  /// `clock`: the transaction tracker's (it must outlive the observer).
  FrameMetrics(metrics::ProxyMetrics& metrics, tap::TapHub& hub, const cluster::TopicNames& topic_names,
               std::vector<std::string> listener_names, bool count_errors = true, bool track_transactions = true,
               const util::Clock& clock = util::steady_clock());

  // stage::FrameObserver
  void on_request(const stage::RequestContext& ctx) override;
  void on_response(const stage::ResponseContext& ctx, std::chrono::nanoseconds latency) override;
  void on_fault_injected(const stage::FaultEvent& event) override;
  void on_response_withheld(uint64_t connection_id, int32_t correlation_id) override;
  void on_connection_closed(uint64_t connection_id) override;

  /// The transactions rebuilt from the frames this observer sees (docs/transactions.md).
  TransactionTracker& transactions() { return transactions_; }

 private:
  /// Opt-in topic label: the topics `ctx` names (decodes the request).
  void count_topics(const stage::RequestContext& ctx, metrics::LabelValues& topics);

  metrics::ProxyMetrics& metrics_;
  tap::TapHub& hub_;
  const cluster::TopicNames& topic_names_;
  std::vector<std::string> listener_names_;
  bool count_errors_;
  bool track_transactions_;
  std::array<int, stage::kStageCount> stage_ids_{};  ///< ProxyMetrics' id of each stage's label
  TransactionTracker transactions_;
};

}  // namespace kproxy::observe
