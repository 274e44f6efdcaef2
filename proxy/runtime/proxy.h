// Proxy: the running daemon: config snapshot, workers, and the per-listener broker directories.
//
//   main ──► Proxy ──► Worker × N (thread + uv_loop_t)
//                        ├─ Listener (bootstrap port, then one per broker port; one socket shared by all workers)
//                        └─ ClientConnection ──► UpstreamConnection   (same loop, no locks)
//
// The config is an immutable snapshot (shared_ptr<const Config>) read when a connection is
// accepted; reload() swaps it. The admin API (a later issue) plugs in here: it needs config(),
// reload() and the broker directories, all safe to call from its own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codec/frame_memory_budget.h"
#include "config/config.h"
#include "proxy/chaos/rule_set.h"
#include "proxy/chaos/scenario.h"
#include "proxy/cluster/broker_address_rewrite.h"
#include "proxy/cluster/broker_directory.h"
#include "proxy/runtime/connection_balancer.h"
#include "proxy/runtime/worker.h"
#include "proxy/tls/listener_tls.h"

namespace kproxy::proxy {

class Proxy {
 public:
  explicit Proxy(std::shared_ptr<const config::Config> config);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  /// Binds every listener on every worker and starts the worker threads. Returns "" or the error
  /// (then nothing runs and the Proxy can be destroyed).
  std::string start();

  /// Stop accepting; let in-flight requests finish up to the config's drain_timeout (or
  /// `deadline` if given), then close. Safe from any thread; a second call shortens the deadline.
  void drain(std::optional<std::chrono::milliseconds> deadline = std::nullopt);
  /// Called once, from a worker thread, when every worker has stopped after a drain.
  void set_on_stopped(std::function<void()> on_stopped) { on_stopped_ = std::move(on_stopped); }
  /// Waits for the worker threads.
  void join();

  /// Swaps in `next`. Returns "" or why it is refused (the current config then stays).
  /// Changing the listeners or the worker count needs a restart and is refused.
  std::string reload(std::shared_ptr<const config::Config> next);
  std::shared_ptr<const config::Config> config() const;
  /// The TLS contexts of listener `listener_index`, as of the last start or reload (the
  /// certificate files are read again on every reload). Safe from any thread.
  tls::ListenerTls listener_tls(size_t listener_index) const;

  /// True once start() succeeded: every listener is bound and every worker runs. Safe from any
  /// thread (the admin API opens before the listeners and reads it).
  bool started() const { return started_.load(std::memory_order_acquire); }
  /// Workers running (0 before start(): the admin API may ask before then).
  size_t worker_count() const { return started() ? workers_.size() : 0; }
  /// Which worker serves each accepted connection (proxy/runtime/connection_balancer.h). After start().
  ConnectionBalancer& balancer() { return *balancer_; }
  /// Worker `index` (admin health checks post pings to its loop).
  Worker& worker(size_t index) { return *workers_[index]; }
  BrokerDirectory& directory(size_t listener_index) { return *directories_[listener_index]; }
  /// The port listener `listener_index` listens on: the configured one, or the kernel's pick for
  /// port 0 (0 before start()). Safe from any thread.
  uint16_t listener_port(size_t listener_index) const;
  const BrokerAddressRewrite& rewrite(size_t listener_index) const { return *rewrites_[listener_index]; }
  /// Fault rules and ApiVersions policy (from the config's faults:/api_versions:, changed at run
  /// time through the admin API); every connection reads its current snapshot per frame.
  chaos::LiveRules& live_rules() { return live_rules_; }
  /// Applies `scenario` (proxy/chaos/scenario.h) on top of the config's rules and policy,
  /// replacing the scenario applied before (null: back to the config's alone). Kept across
  /// reloads. "" or why refused (nothing changed). Safe from any thread.
  std::string set_scenario(std::shared_ptr<const chaos::Scenario> scenario);
  /// The scenario applied now, null when none.
  std::shared_ptr<const chaos::Scenario> scenario() const;
  /// Memory every connection's FrameReaders may hold for partial frames (limits.max_buffered_frame_bytes).
  codec::FrameMemoryBudget& frame_budget() { return frame_budget_; }
  /// Announced bytes of the requests being forwarded while they arrive (limits.max_streamed_request_bytes).
  codec::FrameMemoryBudget& streamed_budget() { return streamed_budget_; }

  // For workers and connections.
  /// A response named a broker that has no port yet: open its port on every worker, on the
  /// calling worker right away so the client can connect as soon as it reads the response.
  void open_broker_port(Worker& caller, size_t listener_index, int32_t node_id, uint16_t port);
  /// The bootstrap server a new connection on listener `listener_index` goes to under `config`.
  config::HostPort bootstrap_target(const config::Config& config, size_t listener_index) const;
  /// A connect to bootstrap server `target` failed: later connections try the next one.
  void bootstrap_unreachable(size_t listener_index, const config::HostPort& target);
  /// Reserves a connection slot under limits.max_connections; false when full.
  bool reserve_connection();
  void release_connection();
  uint64_t next_connection_id() { return next_connection_id_.fetch_add(1, std::memory_order_relaxed); }
  void worker_stopped();

 private:
  mutable std::mutex config_mutex_;
  std::shared_ptr<const config::Config> config_;
  std::vector<tls::ListenerTls> tls_;  ///< under config_mutex_, swapped with config_
  std::vector<std::unique_ptr<BrokerDirectory>> directories_;
  std::vector<std::unique_ptr<BrokerAddressRewrite>> rewrites_;
  /// `chaos` (the config's) with the applied scenario on top. "" or why not.
  std::string with_scenario(chaos::ChaosConfig& chaos, const config::Config& config) const;

  chaos::LiveRules live_rules_;
  std::shared_ptr<const chaos::Scenario> scenario_;  ///< under config_mutex_
  codec::FrameMemoryBudget frame_budget_;
  codec::FrameMemoryBudget streamed_budget_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::shared_ptr<ConnectionBalancer> balancer_;  ///< shared with the metrics collector
  /// Per listener: index (modulo the list size) of the bootstrap server new connections use.
  std::unique_ptr<std::atomic<uint32_t>[]> preferred_upstream_;
  std::unique_ptr<std::atomic<uint16_t>[]> listener_ports_;  ///< per listener, set by start()
  std::atomic<uint64_t> next_connection_id_{1};
  std::atomic<int64_t> open_connections_{0};
  std::atomic<unsigned> running_workers_{0};
  std::function<void()> on_stopped_;
  std::atomic<bool> started_{false};  ///< set once every worker runs; the admin thread reads it
};

}  // namespace kproxy::proxy
