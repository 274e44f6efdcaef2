// ProcessServices: the one owner of what every layer of a running kproxy shares, built in main.cc
// from the config before anything that uses it:
//
//   main ──► ProcessServices(config) ──► view(): stage::Services ──► Proxy ──► Worker ──► connections
//                                   └──► AdminRuntime: registers routes over metrics(), tap(),
//                                        transactions() (it builds none of them)
//
// metrics.frames: false leaves the frame observer out (per-frame metrics, tap and transaction
// tracker off: an empty tracker answers GET /transactions); metrics.error_codes and
// metrics.transactions switch parts of the observer off to measure what they cost. A `tracing:`
// section starts the exporter of the transactions' traces; stop() flushes it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "proxy/cluster/topic_names.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/self_connection.h"
#include "proxy/observe/trace_exporter.h"
#include "proxy/observe/transaction_tracker.h"
#include "proxy/stage/services.h"
#include "proxy/tap/tap_hub.h"
#include "proxy/util/clock.h"

namespace kproxy::services {

class ProcessServices {
 public:
  /// Reads the config's metrics:, tap: and tracing: sections (read at start; a reload does not
  /// change them) and names the listener slots after its listeners (plus "runtime").
  explicit ProcessServices(const config::Config& config);
  ~ProcessServices();
  ProcessServices(const ProcessServices&) = delete;
  ProcessServices& operator=(const ProcessServices&) = delete;

  /// What the runtime, connections and stages are handed.
  const stage::Services& view() const { return view_; }
  metrics::ProxyMetrics& metrics() { return metrics_; }
  tap::TapHub& tap() { return tap_; }
  /// The transactions the frame observer rebuilds (an empty tracker when metrics.frames or
  /// metrics.transactions is off).
  std::shared_ptr<observe::TransactionTracker> transactions() const { return transactions_; }
  /// Sends the traces still queued (within tracing.timeout). Idempotent.
  void stop();

 private:
  util::SteadyClock clock_;
  metrics::ProxyMetrics metrics_;
  tap::TapHub tap_;
  cluster::TopicNames topic_names_;
  net::SelfConnectionDetector self_connections_;
  std::shared_ptr<stage::FrameObserver> observer_;
  std::shared_ptr<observe::TransactionTracker> transactions_;
  std::shared_ptr<observe::TraceExporter> traces_;
  stage::Services view_;
};

}  // namespace kproxy::services
