#include "proxy/services/process_services.h"

#include <spdlog/spdlog.h>

#include "proxy/observe/frame_metrics.h"
#include "proxy/observe/transaction_metrics.h"
#include "proxy/observe/transaction_traces.h"

namespace kproxy::services {

namespace {

std::vector<std::string> listener_slot_names(const config::Config& config) {
  std::vector<std::string> names;
  for (const auto& l : config.listeners) names.push_back(l.name);
  // The last slot counts every listener added at run time (proxy/runtime/proxy.h add_listener):
  // per-listener metrics are sized when a thread first counts.
  names.push_back("runtime");
  return names;
}

}  // namespace

ProcessServices::ProcessServices(const config::Config& config)
    : view_{metrics_, topic_names_, self_connections_, stage::or_no_observer(nullptr), clock_} {
  const auto names = listener_slot_names(config);
  metrics_.set_listener_names(names);
  tap::TapLimits tap_limits = tap_.limits();
  tap_limits.records = config.tap.records;
  tap_limits.max_record_bytes = config.tap.max_record_bytes;
  tap_limits.max_records = config.tap.max_records;
  tap_.set_limits(tap_limits);
  const auto& m = config.metrics;
  if (m.frames && (m.topic_labels || m.client_id_labels))
    metrics_.enable_traffic_labels(m.topic_labels, m.client_id_labels, m.max_label_values);
  if (m.frames) {
    auto observer = std::make_shared<observe::FrameMetrics>(metrics_, tap_, topic_names_, names, m.error_codes, m.transactions, clock_);
    // The metrics and the routes hold the tracker (and so the observer) alive while they read it.
    transactions_ = std::shared_ptr<observe::TransactionTracker>(observer, &observer->transactions());
    observer_ = std::move(observer);
    view_.observer = observer_;
    observe::export_transaction_metrics(metrics_, transactions_);
    if (config.tracing) traces_ = observe::start_transaction_tracing(transactions_, *config.tracing, metrics_);
  } else {
    transactions_ = std::make_shared<observe::TransactionTracker>();  // frames off: nothing is tracked
    if (config.tracing)
      spdlog::warn("tracing: no traces while per-frame metrics are off (metrics.frames: false): transactions are rebuilt from the frames");
  }
}

ProcessServices::~ProcessServices() { stop(); }

void ProcessServices::stop() {
  if (traces_) traces_->stop();  // sends what is queued, within tracing.timeout
}

}  // namespace kproxy::services
