// ConnectionMetrics: the gauges one client connection counts in (open connections, in-flight
// requests, kproxy_clients by software), taken back when it closes, and its byte counts. A member
// of ClientConnection (proxy/connection/client_connection.h); the pipeline counts its requests
// and responses here.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/close_reason.h"

namespace kproxy::metrics {

/// Per-connection gauges; a member of ClientConnection. Loop thread only.
class ConnectionMetrics {
 public:
  /// Counts in `process` (the process's metrics), under listener slot `listener_index`.
  ConnectionMetrics(ProxyMetrics& process, size_t listener_index);
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
  /// Residence (kproxy_proxy_residence_seconds{api,direction}), measured per read: the frames a
  /// read brings are noted as they are forwarded, and observed once the read is written. The
  /// notes live in the loop thread's shard, not in the connection (a read ends before the next
  /// one starts on the same thread), so an idle connection carries none of it.
  /// A read begins: forget notes a closed connection may have left.
  void residence_begin(Direction direction) { shard().residence_pending[static_cast<size_t>(direction)].used = 0; }
  /// A frame of `api` went to the other side's socket queue in this read (not held by a rule).
  void forwarded(Direction direction, int16_t api) { shard().residence_pending[static_cast<size_t>(direction)].note(api); }
  bool residence_pending(Direction direction) { return shard().residence_pending[static_cast<size_t>(direction)].used != 0; }
  /// The frames noted since residence_begin(), read at `arrived`, were handed to the socket at
  /// `written`.
  void residence_written(Direction direction, std::chrono::steady_clock::time_point arrived, std::chrono::steady_clock::time_point written);
  /// One of kproxy's own events (kproxy_proxy_<event>_total) on this connection.
  void count(ProxyEvent event, uint64_t n = 1) { add(shard().events[static_cast<size_t>(event)], n); }
  /// The process's metrics this connection counts in.
  ProxyMetrics& process() { return process_; }
  void bytes_in(size_t n) { bytes_in_ += n; }
  void bytes_out(size_t n) { bytes_out_ += n; }
  uint64_t bytes_in() const { return bytes_in_; }
  uint64_t bytes_out() const { return bytes_out_; }
  /// The software the client announced last (ApiVersions v3+, KIP-511): the connection counts
  /// once in kproxy_clients, under its latest name, whatever it announced before.
  void client_software(std::string_view name, std::string_view version);
  /// The connection closes: `reason` names the label of kproxy_connections_closed_total.
  void closed(net::CloseCategory reason);

 private:
  /// The shard of the thread the connection lives on, found on first use.
  MetricsShard& shard() {
    if (shard_ == nullptr) shard_ = &process_.shard();
    return *shard_;
  }

  ProxyMetrics& process_;
  MetricsShard* shard_ = nullptr;
  uint32_t listener_;  ///< 32 bits, beside the flags: every idle connection carries this object
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
