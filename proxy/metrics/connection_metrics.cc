#include "proxy/metrics/connection_metrics.h"

namespace kproxy::metrics {

ConnectionMetrics::ConnectionMetrics(ProxyMetrics& process, size_t listener_index)
    : process_(process), listener_(static_cast<uint32_t>(listener_index)) {}

ConnectionMetrics::~ConnectionMetrics() {
  if (!closed_) closed(net::CloseCategory::kOther);
}

void ConnectionMetrics::opened() {
  client_open_ = true;
  process_.connection_opened(listener_, Side::kClient);
}

void ConnectionMetrics::upstream_connected() {
  if (upstream_open_) return;
  upstream_open_ = true;
  process_.connection_opened(listener_, Side::kUpstream);
}

void ConnectionMetrics::client_software(std::string_view name, std::string_view version) {
  if (closed_) return;
  if (software_ ? ProxyMetrics::is_series_of(software_, name, version) : name.empty()) return;
  auto& m = process_;
  m.client_gone(software_);
  software_ = name.empty() ? nullptr : m.client_seen(name, version);
}

void ConnectionMetrics::closed(net::CloseCategory reason) {
  if (closed_) return;
  closed_ = true;
  auto& m = process_;
  if (client_open_) m.connection_closed(listener_, Side::kClient);
  if (upstream_open_) m.connection_closed(listener_, Side::kUpstream);
  if (inflight_) m.inflight(-inflight_);
  inflight_ = 0;
  if (client_open_) m.connection_close_reason(listener_, reason);
  m.client_gone(software_);
  software_ = nullptr;
}

void ConnectionMetrics::residence_written(Direction direction, std::chrono::steady_clock::time_point arrived,
                                          std::chrono::steady_clock::time_point written) {
  ResidencePending& p = shard().residence_pending[static_cast<size_t>(direction)];
  auto residence = std::chrono::duration_cast<std::chrono::nanoseconds>(written - arrived);
  for (uint8_t i = 0; i < p.used; ++i) observe_residence(shard(), direction, p.apis[i], residence, p.frames[i]);
  p.used = 0;
}

}  // namespace kproxy::metrics
