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
#include <utility>
#include <vector>

#include "codec/frame_memory_budget.h"
#include "config/config.h"
#include "proxy/chaos/rule_set.h"
#include "proxy/chaos/scenario.h"
#include "proxy/cluster/broker_address_rewrite.h"
#include "proxy/cluster/broker_directory.h"
#include "proxy/connection/read_pressure.h"
#include "proxy/runtime/connection_balancer.h"
#include "proxy/runtime/worker.h"
#include "proxy/stage/services.h"
#include "proxy/tls/listener_tls.h"

namespace kproxy::runtime {

class Proxy {
 public:
  /// `services`: the process's (proxy/stage/services.h); they must outlive the Proxy.
  Proxy(std::shared_ptr<const config::Config> config, const stage::Services& services);
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
  cluster::BrokerDirectory& directory(size_t listener_index) { return *directory_slots_[listener_index].load(std::memory_order_acquire); }
  /// The port listener `listener_index` listens on: the configured one, or the kernel's pick for
  /// port 0 (0 before start()). Safe from any thread.
  uint16_t listener_port(size_t listener_index) const;
  const cluster::BrokerAddressRewrite& rewrite(size_t listener_index) const {
    return *rewrite_slots_[listener_index].load(std::memory_order_acquire);
  }

  // Listeners added and removed at run time (the admin API's PUT/DELETE /listeners/{name}, the
  // Toxiproxy API's Kafka-aware proxies; docs/admin-api.openapi.yaml). They take the slots after
  // the config's listeners (listener_index config.listeners.size() + k), at most
  // kMaxRuntimeListeners at once; each is what a `listeners:` entry makes (decoding, address
  // rewrite, broker ports, fault rules, metrics under listener="runtime"), without TLS.
  static constexpr size_t kMaxRuntimeListeners = 64;
  struct AddedListener {
    std::string error;  ///< "" when it listens
    int status = 0;     ///< with an error: 409 (name or address taken, cap reached), 503 (not running), 400
    size_t index = 0;   ///< its listener_index
    uint16_t port = 0;  ///< the bound port (the kernel's pick for port 0)
  };
  /// Binds `listener` (checked by config::load_listener_entry first) on every worker. Safe from
  /// any thread (not a worker's); returns once every worker listens.
  AddedListener add_listener(config::ListenerConfig listener);
  /// Closes run-time listener `name`: no new connection from now on; its connections drain
  /// (finish what is in flight) for up to `drain`, then are closed (0: closed at once, as
  /// Toxiproxy closes a deleted proxy's). False when there is no such run-time listener. Returns
  /// once every worker closed its listening sockets (the ports are free then).
  bool remove_listener(const std::string& name, std::chrono::milliseconds drain);
  /// The run-time listeners now, with their listener_index.
  std::vector<std::pair<size_t, std::shared_ptr<const config::ListenerConfig>>> runtime_listeners() const;
  /// Listener `listener_index`'s config: the config file's, or a run-time listener's (null when
  /// that slot is free). Safe from any thread.
  std::shared_ptr<const config::ListenerConfig> listener_config(size_t listener_index) const;
  /// Slots for listeners: the config's plus kMaxRuntimeListeners.
  size_t listener_slots() const { return slot_count_; }
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
  /// The process's services, as given.
  const stage::Services& services() const { return services_; }
  /// What every worker's ReadPressure counts in.
  connection::ReadPauseMetrics& read_pauses() { return read_pauses_; }

 private:
  /// kproxy_worker_connections and kproxy_partial_frame_bytes, read from this Proxy (start()).
  void export_gauges();

  stage::Services services_;
  connection::ReadPauseMetrics read_pauses_;
  metrics::LabelledCounter& port_refusals_;  ///< kproxy_proxy_broker_ports_refused_total
  /// Held while the Proxy lives; the gauges' readers hold it weakly.
  std::shared_ptr<const void> alive_ = std::make_shared<int>(0);
  mutable std::mutex config_mutex_;
  std::shared_ptr<const config::Config> config_;
  std::vector<tls::ListenerTls> tls_;  ///< under config_mutex_, swapped with config_
  size_t file_listeners_ = 0;          ///< the config's listeners (slots before the run-time ones)
  size_t slot_count_ = 0;
  /// Per slot, the directory and rewrite in use; the objects live in owned_* until ~Proxy (a
  /// connection of a removed run-time listener may still hold them while it drains).
  std::unique_ptr<std::atomic<cluster::BrokerDirectory*>[]> directory_slots_;
  std::unique_ptr<std::atomic<const cluster::BrokerAddressRewrite*>[]> rewrite_slots_;
  std::vector<std::unique_ptr<cluster::BrokerDirectory>> owned_directories_;    ///< under runtime_mutex_
  std::vector<std::unique_ptr<cluster::BrokerAddressRewrite>> owned_rewrites_;  ///< under runtime_mutex_
  std::shared_ptr<cluster::BrokerPortClaims> claims_;
  std::mutex runtime_mutex_;  ///< one add or remove at a time
  /// Per run-time slot k (listener_index file_listeners_ + k): its config, null when free. Under config_mutex_.
  std::vector<std::shared_ptr<const config::ListenerConfig>> runtime_;
  size_t next_runtime_slot_ = 0;  ///< where the search for a free slot starts (slots are reused last)
  /// Runs `task` on every worker's loop and waits (at most a few seconds) until each ran it or
  /// dropped it (a worker that ended).
  void on_every_worker(const std::function<void(Worker&)>& task);
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

}  // namespace kproxy::runtime
