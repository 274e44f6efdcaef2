// Health: what /healthz and /readyz answer (the Kubernetes sidecar relies on these semantics).
//
//   /healthz  200 when every worker loop ran a ping task posted to it within `ping_timeout`
//             (a loop stuck in a callback, or a dead worker thread, makes it 503).
//   /readyz   200 once every listener's upstream bootstrap has answered a Kafka ApiVersions
//             request (probed from the admin thread, latched once answered: a broker that goes
//             away later shows in the metrics, not as a restart of the pod); 503 before that,
//             and 503 while draining.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace kproxy::admin {

struct HealthHooks {
  /// Number of worker loops.
  std::function<size_t()> worker_count;
  /// Runs `task` on worker `index`'s loop soon (Worker::post).
  std::function<void(size_t index, std::function<void()> task)> post;
  /// "host:port" of each listener's upstream bootstrap.
  std::function<std::vector<std::string>()> upstreams;
  /// True while the proxy drains (not ready).
  std::function<bool()> draining;
  /// False until every Kafka listener is bound and every worker runs (not ready: "starting").
  std::function<bool()> started;
};

struct HealthReport {
  bool ok = false;
  std::string json;  ///< details for the response body
};

class Health {
 public:
  explicit Health(HealthHooks hooks, std::chrono::milliseconds ping_timeout = std::chrono::milliseconds(2000),
                  std::chrono::milliseconds probe_timeout = std::chrono::milliseconds(2000));
  HealthReport liveness();
  HealthReport readiness();
  /// Marks a listener's upstream as having answered (e.g. a worker saw a broker response).
  void upstream_answered(size_t listener);

 private:
  HealthHooks hooks_;
  std::chrono::milliseconds ping_timeout_;
  std::chrono::milliseconds probe_timeout_;
  std::mutex mutex_;
  std::vector<bool> answered_;
};

/// Sends an ApiVersions v0 request to `host_port` and waits for a response frame with the same
/// correlation id. Returns "" when the broker answered, or what went wrong.
std::string probe_kafka(const std::string& host_port, std::chrono::milliseconds timeout);

}  // namespace kproxy::admin
