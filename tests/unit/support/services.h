// TestServices: a test's own stage::Services (proxy/stage/services.h): metrics, topic names
// and a self-connection detector no other test shares, no frame observer unless the test sets
// one, and a clock the test moves by hand (manual_clock.h) or the steady clock.
#pragma once

#include <memory>

#include "proxy/cluster/topic_names.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/self_connection.h"
#include "proxy/stage/frame_observer.h"
#include "proxy/stage/services.h"
#include "proxy/util/clock.h"
#include "tests/unit/support/manual_clock.h"

namespace kproxy::testing {

struct TestServices {
  metrics::ProxyMetrics metrics;
  cluster::TopicNames topic_names;
  net::SelfConnectionDetector self_connections;
  util::SteadyClock steady;
  ManualClock manual;

  /// The view handed to what is under test: `observer` (null: one that does nothing); the
  /// manual clock when `manual_time`, else the steady one.
  stage::Services view(std::shared_ptr<stage::FrameObserver> observer = nullptr, bool manual_time = false) {
    return stage::Services{metrics, topic_names, self_connections, stage::or_no_observer(std::move(observer)),
                           manual_time ? static_cast<const util::Clock&>(manual) : steady};
  }
};

}  // namespace kproxy::testing
