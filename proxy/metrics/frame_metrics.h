// FrameMetrics: the pipeline's FrameObserver that feeds ProxyMetrics and the tap, and
// ConnectionMetrics, the per-connection part (gauges that must come down when it closes).
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

#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/close_reason.h"
#include "proxy/pipeline/frame_observer.h"
#include "proxy/pipeline/stage.h"
#include "proxy/tap/tap_hub.h"

namespace kproxy::metrics {

class FrameMetrics final : public proxy::FrameObserver {
 public:
  /// `count_errors` false skips decoding responses for their error codes (cost attribution in
  /// bench/metrics: KPROXY_FRAME_METRICS=no-errors).
  FrameMetrics(ProxyMetrics& metrics, tap::TapHub& hub, std::vector<std::string> listener_names, bool count_errors = true);

  // proxy::FrameObserver
  void on_request(const proxy::RequestContext& ctx) override;
  void on_response(const proxy::ResponseContext& ctx, std::chrono::nanoseconds latency) override;
  void on_fault_injected(const proxy::FaultEvent& event) override;

 private:
  /// Opt-in topic label: the topics `ctx` names (decodes the request).
  void count_topics(const proxy::RequestContext& ctx, LabelValues& topics);

  ProxyMetrics& metrics_;
  tap::TapHub& hub_;
  std::vector<std::string> listener_names_;
  bool count_errors_;
  std::array<int, proxy::kStageCount> stage_ids_{};  ///< ProxyMetrics' id of each stage's label
};

/// Per-connection gauges; a member of ClientConnection. Loop thread only.
class ConnectionMetrics {
 public:
  explicit ConnectionMetrics(size_t listener_index);
  ~ConnectionMetrics();  ///< takes back whatever the connection still counts in the gauges
  ConnectionMetrics(const ConnectionMetrics&) = delete;
  ConnectionMetrics& operator=(const ConnectionMetrics&) = delete;

  void opened();
  void upstream_connected();
  // Per request: straight to the loop thread's shard, found once per connection (no lookup of
  // the process's metrics and the thread's shard per frame).
  void request_pushed() {
    ++inflight_;
    add(shard().inflight, 1);
  }
  void response_popped() {
    if (inflight_ > 0) {
      --inflight_;
      add(shard().inflight, -1);
    }
  }
  void bytes_in(size_t n) { bytes_in_ += n; }
  void bytes_out(size_t n) { bytes_out_ += n; }
  uint64_t bytes_in() const { return bytes_in_; }
  uint64_t bytes_out() const { return bytes_out_; }
  /// The software the client announced last (ApiVersions v3+, KIP-511): the connection counts
  /// once in kproxy_clients, under its latest name, whatever it announced before.
  void client_software(std::string_view name, std::string_view version);
  /// The connection closes: `reason` names the label of kproxy_connections_closed_total.
  void closed(proxy::CloseCategory reason);

 private:
  /// The shard of the thread the connection lives on (ProxyMetrics::instance()), found on first use.
  MetricsShard& shard() {
    if (shard_ == nullptr) shard_ = &ProxyMetrics::instance().shard();
    return *shard_;
  }

  size_t listener_;
  MetricsShard* shard_ = nullptr;
  bool client_open_ = false;
  bool upstream_open_ = false;
  bool closed_ = false;
  int64_t inflight_ = 0;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  /// The kproxy_clients series this connection counts in (null = none). The series' key holds
  /// the name and version, so the connection keeps no copy of them.
  ProxyMetrics::ClientSeries software_ = nullptr;
};

}  // namespace kproxy::metrics
