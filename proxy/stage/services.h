// Services: the process's shared collaborators that the runtime, every connection, its pipeline
// and its stages use. main.cc builds them once from the config (proxy/services/process_services.h
// owns them) and hands this view down: Proxy ─► Worker ─► ConnectionEnvironment::services() ─►
// Pipeline ─► StageSetup. No layer reaches them through a process-wide accessor, so a test builds
// its own (tests/unit/support/services.h) and two in one process do not share counts.
#pragma once

#include <memory>

#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/self_connection.h"
#include "proxy/stage/frame_observer.h"
#include "proxy/util/clock.h"

/// Learned topic names (proxy/cluster/topic_names.h); the layers that read it include it.
namespace kproxy::cluster {
class TopicNames;
}

namespace kproxy::stage {

struct Services {
  /// kproxy's Prometheus metrics (per-thread shards, summed at scrape time).
  metrics::ProxyMetrics& metrics;
  /// Topic names by id, learned from Metadata responses (v13+ requests name topics by id only).
  cluster::TopicNames& topic_names;
  /// kproxy's own listening and connected addresses: a broker address that leads back to kproxy.
  net::SelfConnectionDetector& self_connections;
  /// What watches every frame (per-frame metrics, tap, transaction tracker); never null: a
  /// do-nothing observer when metrics.frames is off.
  std::shared_ptr<FrameObserver> observer;
  /// Where "now" is read for deadlines and delays.
  const util::Clock& clock;
};

}  // namespace kproxy::stage
