// Worker: one thread running one uv_loop_t, with its listening sockets and the client
// connections (and their upstream connections) it serves. Nothing on a worker's loop is
// touched by another thread; other threads talk to it only through post(). A connection one
// worker accepts may be served by another: the ConnectionBalancer (proxy/runtime/connection_balancer.h)
// picks the worker with the fewest connections, and the accepted socket is posted to it.
#pragma once

#include <atomic>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <uv.h>

#include "config/config.h"
#include "proxy/connection/connection_environment.h"
#include "proxy/connection/read_pressure.h"
#include "proxy/net/uv_handle.h"
#include "proxy/runtime/broker_discovery.h"
#include "proxy/runtime/listener.h"
#include "proxy/runtime/memory_return.h"
#include "proxy/util/intrusive_list.h"

namespace kproxy::runtime {

class Proxy;

/// The ConnectionEnvironment of every connection it serves.
class Worker final : public connection::ConnectionEnvironment {
 public:
  Worker(Proxy& proxy, unsigned index);
  ~Worker() override;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  unsigned index() const { return index_; }
  uv_loop_t* loop() override { return &loop_; }
  const stage::Services& services() override;
  Proxy& proxy() { return proxy_; }

  /// Opens a listening socket: binds a new one, or with `shared_fd` >= 0 listens on a duplicate of
  /// the socket another worker bound (proxy/runtime/listener.h). On the loop thread, or before start().
  /// Returns "" or the error.
  std::string open_listener(const connection::ListenerSpec& spec, int shared_fd = -1);
  /// The descriptor of this worker's listening socket on `port`, -1 if it has none.
  int listener_fd(uint16_t port) const;
  /// True if this worker listens on `port` already.
  bool listens_on(uint16_t port) const;

  /// Closes the listening sockets of listener `listener_index` (its bootstrap and broker ports);
  /// its connections drain, and those still open after `deadline` are closed (0: at once).
  /// Loop thread only (Proxy::remove_listener posts it).
  void close_listener(size_t listener_index, std::chrono::milliseconds deadline);

  /// Starts the thread that runs the loop.
  void start();
  /// Runs `task` on the loop thread soon. Safe from any thread.
  void post(std::function<void()> task);
  /// Waits for the thread to end (after a drain).
  void join();

  /// Stops accepting, lets connections finish what is in flight, closes the rest after `deadline`.
  /// Loop thread only. The loop ends once everything is closed.
  void begin_drain(std::chrono::milliseconds deadline);
  /// Safe from any thread (the admin API's /readyz reads it).
  bool draining() const { return draining_.load(std::memory_order_relaxed); }

  // For Listener and ClientConnection.
  /// A connection is waiting on `server`: accepts it and serves it here, or hands it to the worker
  /// the balancer picks, or refuses it (limits.max_connections, draining).
  void accept(uv_stream_t* server, const std::shared_ptr<const connection::ListenerSpec>& spec);
  void forget(connection::ClientConnection* connection) override;

  // ConnectionEnvironment (the rest): the Proxy's, for the connections of this worker.
  codec::FrameMemoryBudget& frame_budget() override;
  codec::FrameMemoryBudget& streamed_budget() override;
  connection::ReadPressure& read_pressure() override { return read_pressure_; }
  chaos::LiveRules& live_rules() override;
  const cluster::BrokerAddressRewrite& rewrite(size_t listener_index) override;
  tls::ListenerTls listener_tls(size_t listener_index) override;
  std::optional<config::HostPort> broker_address(size_t listener_index, int32_t node_id) override;
  void open_broker_port(size_t listener_index, int32_t node_id, uint16_t port) override;
  void bootstrap_unreachable(size_t listener_index, const config::HostPort& target) override;
  void release_connection_slot() override;
  void tls_handshake_done() override;
  void discover_brokers(size_t listener_index, const config::HostPort& bootstrap, std::shared_ptr<const tls::TlsContext> upstream_tls,
                        std::chrono::milliseconds timeout, connection::ClientConnection* waiter) override;
  size_t connection_count() const { return connections_.size(); }

 private:
  struct HandedOver;
  void run();
  /// Serves an accepted socket another worker handed over (on this loop).
  void adopt(HandedOver& socket);
  /// Accepts a connection here and closes it at once: the client sees a refusal, not a hang.
  void refuse(uv_stream_t* server, const connection::ListenerSpec& spec, const char* why);
  /// A new ClientConnection on this loop, counted and registered; the socket is attached next.
  connection::ClientConnection* new_connection(std::shared_ptr<const connection::ListenerSpec> spec,
                                               std::shared_ptr<const config::Config> config);
  /// Routes an attached connection to its broker (bootstrap or the broker its port stands for).
  void start_connection(connection::ClientConnection* connection, const connection::ListenerSpec& spec, const config::Config& config);
  void maybe_finish_drain();
  /// Closes the loop's own handles (the listeners, the wakeup, the drain and trim timers).
  void close_handles();
  static void on_wakeup(uv_async_t* async);
  static void on_drain_deadline(uv_timer_t* timer);
  /// Gives freed memory back to the system (proxy/runtime/memory_return.h), as trim_policy_ asked.
  static void on_trim(uv_timer_t* timer);
  /// Starts the trim timer (kTrimDelay), as trim_policy_ asked.
  void schedule_trim();

  Proxy& proxy_;
  unsigned index_;
  uv_loop_t loop_;
  net::UvHandle<uv_async_t> wakeup_;
  net::UvHandle<uv_timer_t> drain_timer_;
  net::UvHandle<uv_timer_t> trim_timer_;
  connection::ReadPressure read_pressure_;  ///< this loop's clients paused for the frame budget
  IdleTrimPolicy trim_policy_;              ///< when opens and closes call for a trim (at most one per kTrimDelay)
  std::thread thread_;
  std::mutex tasks_mutex_;
  std::vector<std::function<void()>> tasks_;
  bool accepting_tasks_ = true;  ///< false once the wakeup handle is closed (under tasks_mutex_)
  std::vector<std::unique_ptr<Listener>> listeners_;
  /// A removed listener's drain: when it runs out, its connections still open are closed.
  struct ListenerDrain {
    Worker* worker = nullptr;
    size_t listener_index = 0;
    net::UvHandle<uv_timer_t> timer;
  };
  std::vector<std::unique_ptr<ListenerDrain>> listener_drains_;
  static void on_listener_drain_deadline(uv_timer_t* timer);
  util::IntrusiveList<connection::ClientConnection> connections_;  ///< allocates nothing per connection
  /// A listener's broker discovery in flight and the connections that wait for it.
  struct Discovery {
    std::unique_ptr<BrokerDiscovery> run;
    std::vector<connection::ClientConnection*> waiters;
  };
  std::map<size_t, Discovery> discoveries_;  ///< by listener index
  /// Discoveries that finished, kept until libuv gave their handles back (released()).
  std::vector<std::unique_ptr<BrokerDiscovery>> finished_discoveries_;
  /// The listener's name in the current config, for log lines.
  std::string listener_name(size_t listener_index) const;
  /// A discovery for `listener_index` finished: learn what it found and wake its waiters.
  void discovered(size_t listener_index, std::vector<DiscoveredBroker> brokers, const std::string& error);
  std::atomic<bool> draining_{false};
  bool finished_ = false;
};

}  // namespace kproxy::runtime
