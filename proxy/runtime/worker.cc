#include "proxy/runtime/worker.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>

#include <spdlog/spdlog.h>

#include "proxy/connection/client_connection.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/owned_descriptor.h"
#include "proxy/runtime/proxy.h"
#include "proxy/util/log_throttle.h"

namespace kproxy::runtime {

Worker::Worker(Proxy& proxy, unsigned index)
    : proxy_(proxy), index_(index), read_pressure_(&loop_, proxy.services().clock, proxy.frame_budget(), proxy.read_pauses()) {
  uv_loop_init(&loop_);
  wakeup_.init(&loop_, this, uv_async_init, on_wakeup);
  drain_timer_.init(&loop_, this, uv_timer_init);
  trim_timer_.init(&loop_, this, uv_timer_init);
}

Worker::~Worker() {
  join();
  if (!finished_) {
    // Never started (start-up failed): close what the constructor and open_listener made.
    close_handles();
    uv_run(&loop_, UV_RUN_DEFAULT);
  }
  if (int rc = uv_loop_close(&loop_); rc != 0) {
    proxy_.services().metrics.count(metrics::ProxyEvent::kLoopClosedUncleanly);
    spdlog::error("worker {}: loop did not close cleanly: {}", index_, uv_strerror(rc));
  }
}

std::string Worker::open_listener(const connection::ListenerSpec& spec, int shared_fd) {
  auto listener = std::make_unique<Listener>(*this, spec);
  std::string error = shared_fd >= 0 ? listener->open_shared(shared_fd) : listener->open();
  if (!error.empty()) return error;
  listeners_.push_back(std::move(listener));
  return "";
}

int Worker::listener_fd(uint16_t port) const {
  for (const auto& l : listeners_) {
    if (l->spec().port == port) return l->fd();
  }
  return -1;
}

bool Worker::listens_on(uint16_t port) const {
  for (const auto& l : listeners_) {
    if (l->spec().port == port) return true;
  }
  return false;
}

void Worker::close_listener(size_t listener_index, std::chrono::milliseconds deadline) {
  std::erase_if(listeners_, [&](const std::unique_ptr<Listener>& l) { return l->spec().listener_index == listener_index; });
  bool draining = false;
  for (connection::ClientConnection* c : connections_.snapshot()) {
    if (c->listener_index() != listener_index) continue;
    if (deadline.count() == 0) {
      c->close({net::CloseCategory::kShutdown, "its listener was removed"});
    } else {
      c->drain({net::CloseCategory::kShutdown, "its listener was removed (in-flight requests answered)"});
      draining = true;
    }
  }
  if (!draining || finished_) return;
  auto drain = std::make_unique<ListenerDrain>();
  drain->worker = this;
  drain->listener_index = listener_index;
  if (drain->timer.init(&loop_, drain.get(), uv_timer_init) < 0) return;
  uv_timer_start(drain->timer.get(), on_listener_drain_deadline, static_cast<uint64_t>(deadline.count()), 0);
  listener_drains_.push_back(std::move(drain));
}

void Worker::on_listener_drain_deadline(uv_timer_t* timer) {
  auto* drain = static_cast<ListenerDrain*>(timer->data);
  Worker* self = drain->worker;
  for (connection::ClientConnection* c : self->connections_.snapshot()) {
    if (c->listener_index() == drain->listener_index)
      c->close({net::CloseCategory::kLimit, "its listener was removed and the drain deadline passed with requests in flight"});
  }
  std::erase_if(self->listener_drains_, [drain](const std::unique_ptr<ListenerDrain>& d) { return d.get() == drain; });
}

void Worker::start() {
  thread_ = std::thread([this] { run(); });
}

void Worker::run() {
  // "kproxy-w0", "kproxy-w1", ...: what `top -H`, perf and bench/proxy/run's per-thread CPU see.
  std::string name = "kproxy-w" + std::to_string(index_);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  uv_run(&loop_, UV_RUN_DEFAULT);
  proxy_.worker_stopped();
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::post(std::function<void()> task) {
  std::lock_guard lock(tasks_mutex_);
  if (!accepting_tasks_) return;  // the loop has ended its drain: nothing more to do there
  tasks_.push_back(std::move(task));
  uv_async_send(wakeup_.get());
}

void Worker::on_wakeup(uv_async_t* async) {
  auto* self = static_cast<Worker*>(async->data);
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard lock(self->tasks_mutex_);
    tasks.swap(self->tasks_);
  }
  for (auto& task : tasks) task();
}

/// An accepted socket on its way to the worker that serves it. If it never gets there (that
/// worker's loop ended first), the socket is closed and its reservations are given back.
struct Worker::HandedOver {
  HandedOver(Proxy& proxy, size_t owner, net::OwnedDescriptor socket, std::shared_ptr<const connection::ListenerSpec> spec)
      : proxy(proxy), owner(owner), socket(std::move(socket)), spec(std::move(spec)) {}
  ~HandedOver() {
    if (!reserved) return;
    proxy.balancer().release(owner);
    proxy.release_connection();
  }
  HandedOver(const HandedOver&) = delete;
  HandedOver& operator=(const HandedOver&) = delete;

  Proxy& proxy;
  size_t owner;
  net::OwnedDescriptor socket;
  std::shared_ptr<const connection::ListenerSpec> spec;
  bool reserved = true;  ///< a max_connections slot and a balancer count, until a connection takes them over
};

void Worker::accept(uv_stream_t* server, const std::shared_ptr<const connection::ListenerSpec>& spec) {
  if (draining_) return refuse(server, *spec, "kproxy is shutting down");
  if (!proxy_.reserve_connection()) return refuse(server, *spec, "limits.max_connections reached");
  size_t owner = proxy_.balancer().assign(index_);
  if (owner == index_) {
    auto config = proxy_.config();
    connection::ClientConnection* connection = new_connection(spec, config);
    if (int rc = uv_accept(server, connection->client_stream()); rc != 0) {
      proxy_.services().metrics.count(metrics::ProxyEvent::kAcceptFailure);
      connection->close({net::CloseCategory::kClientClosed, std::string("accept failed: ") + uv_strerror(rc)});
      return;
    }
    return start_connection(connection, *spec, *config);
  }
  // libuv accepts only into a handle of the listening loop: accept here, keep a duplicate of the
  // socket, and let this loop's handle go (the socket stays open through the duplicate).
  auto handed = std::make_shared<HandedOver>(proxy_, owner, net::OwnedDescriptor(), spec);
  {
    net::UvHandle<uv_tcp_t> accepted;
    accepted.init(&loop_, nullptr, uv_tcp_init);
    uv_os_fd_t fd = -1;
    int rc = uv_accept(server, accepted.stream());
    if (rc == 0) rc = uv_fileno(accepted.base(), &fd);
    if (rc == 0) {
      handed->socket = net::OwnedDescriptor(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
      if (!handed->socket) rc = uv_translate_sys_error(errno);
    }
    if (rc != 0) {
      proxy_.services().metrics.count(metrics::ProxyEvent::kAcceptFailure);
      spdlog::warn("listener={} accept failed, the connection was dropped: {}", spec->label(), uv_strerror(rc));
      return;  // `handed` gives the reservations back
    }
  }
  Worker& target = proxy_.worker(owner);
  target.post([&target, handed] { target.adopt(*handed); });
}

void Worker::adopt(HandedOver& handed) {
  if (draining_) {
    // It began to drain after the balancer picked it: the client sees a refusal (the socket
    // closes with `handed`).
    proxy_.services().metrics.count(metrics::ProxyEvent::kConnectionRefused);
    spdlog::warn("listener={} refused a connection: kproxy is shutting down", handed.spec->label());
    return;
  }
  proxy_.services().metrics.count(metrics::ProxyEvent::kConnectionHandedOver);
  handed.reserved = false;  // the connection holds both from now on
  auto config = proxy_.config();
  connection::ClientConnection* connection = new_connection(handed.spec, config);
  int fd = handed.socket.release();
  if (int rc = uv_tcp_open(reinterpret_cast<uv_tcp_t*>(connection->client_stream()), fd); rc != 0) {
    ::close(fd);
    proxy_.services().metrics.count(metrics::ProxyEvent::kAcceptFailure);
    connection->close({net::CloseCategory::kClientClosed, std::string("cannot take over the accepted socket: ") + uv_strerror(rc)});
    return;
  }
  start_connection(connection, *handed.spec, *config);
}

void Worker::refuse(uv_stream_t* server, const connection::ListenerSpec& spec, const char* why) {
  net::UvHandle<uv_tcp_t> refused;  // closed when it goes out of scope
  refused.init(&loop_, nullptr, uv_tcp_init);
  if (uv_accept(server, refused.stream()) == 0) {
    proxy_.services().metrics.count(metrics::ProxyEvent::kConnectionRefused);  // every refusal, logged or not
    // A full proxy refuses every client attempt: one line per interval, with the count of the
    // ones it left out (1,000 refusals in a second were 1,000 lines; issue #30).
    static util::LogThrottle throttle(std::chrono::seconds(5));
    uint64_t suppressed = 0;
    if (throttle.allow(&suppressed)) {
      spdlog::warn("listener={} refused a connection: {}{}", spec.label(), why,
                   suppressed ? " (and " + std::to_string(suppressed) +
                                    " more since the last such line; kproxy_proxy_connections_refused_total counts each)"
                              : "");
    }
  }
}

connection::ClientConnection* Worker::new_connection(std::shared_ptr<const connection::ListenerSpec> spec,
                                                     std::shared_ptr<const config::Config> config) {
  auto* connection = new connection::ClientConnection(*this, std::move(spec), std::move(config), proxy_.next_connection_id());
  connections_.insert(connection);
  proxy_.services().metrics.count(metrics::ProxyEvent::kConnectionAccepted);
  if (trim_timer_.open() && trim_policy_.on_open(uv_now(&loop_))) schedule_trim();
  return connection;
}

void Worker::start_connection(connection::ClientConnection* connection, const connection::ListenerSpec& spec,
                              const config::Config& config) {
  config::HostPort upstream;
  if (spec.is_broker_port()) {
    auto route = proxy_.directory(spec.listener_index).route_for_port(spec.port);
    if (!route) {
      connection->close({net::CloseCategory::kLimit, "no broker is known for port " + std::to_string(spec.port)});
      return;
    }
    upstream = route->real;
  } else {
    upstream = proxy_.bootstrap_target(config, spec.listener_index);
  }
  connection->start(upstream);
}

void Worker::forget(connection::ClientConnection* connection) {
  connections_.erase(connection);
  for (auto& [listener_index, d] : discoveries_) std::erase(d.waiters, connection);
  proxy_.balancer().release(index_);
  // What the connection held is free now, but malloc keeps free pages for reuse: once the worker
  // is idle (or after a burst of closes) they go back to the system (issue #30 item 5).
  if (trim_timer_.open() && trim_policy_.on_close(connections_.size(), uv_now(&loop_))) schedule_trim();
  maybe_finish_drain();
}

void Worker::schedule_trim() { uv_timer_start(trim_timer_.get(), on_trim, static_cast<uint64_t>(kTrimDelay.count()), 0); }

void Worker::on_trim(uv_timer_t* timer) {
  auto* self = static_cast<Worker*>(timer->data);
  self->trim_policy_.trimmed();
  self->proxy_.services().metrics.count(metrics::ProxyEvent::kMemoryTrim);
  codec::FrameBuffer::drop_cached_blocks();  // this worker's large frame blocks (codec/frame_buffer.h)
  uint64_t started = uv_hrtime();
  bool released = trim_free_memory();
  spdlog::debug("worker {}: gave free memory back to the system in {} us ({} connections open){}", self->index_,
                (uv_hrtime() - started) / 1000, self->connections_.size(), released ? "" : ": there was none");
}

const stage::Services& Worker::services() { return proxy_.services(); }

codec::FrameMemoryBudget& Worker::frame_budget() { return proxy_.frame_budget(); }
codec::FrameMemoryBudget& Worker::streamed_budget() { return proxy_.streamed_budget(); }
chaos::LiveRules& Worker::live_rules() { return proxy_.live_rules(); }
const cluster::BrokerAddressRewrite& Worker::rewrite(size_t listener_index) { return proxy_.rewrite(listener_index); }
tls::ListenerTls Worker::listener_tls(size_t listener_index) { return proxy_.listener_tls(listener_index); }
std::optional<config::HostPort> Worker::broker_address(size_t listener_index, int32_t node_id) {
  auto route = proxy_.directory(listener_index).route_for_node(node_id);
  if (!route) return std::nullopt;
  return route->real;
}
void Worker::open_broker_port(size_t listener_index, int32_t node_id, uint16_t port) {
  proxy_.open_broker_port(*this, listener_index, node_id, port);
}
void Worker::bootstrap_unreachable(size_t listener_index, const config::HostPort& target) {
  proxy_.bootstrap_unreachable(listener_index, target);
}
void Worker::release_connection_slot() { proxy_.release_connection(); }

std::string Worker::listener_name(size_t listener_index) const {
  auto config = proxy_.config();
  if (config && listener_index < config->listeners.size()) return config->listeners[listener_index].name;
  return "#" + std::to_string(listener_index);
}

void Worker::discover_brokers(size_t listener_index, const config::HostPort& bootstrap, std::shared_ptr<const tls::TlsContext> upstream_tls,
                              std::chrono::milliseconds timeout, connection::ClientConnection* waiter) {
  std::erase_if(finished_discoveries_, [](const auto& d) { return d->released(); });
  Discovery& d = discoveries_[listener_index];
  d.waiters.push_back(waiter);
  if (d.run) return;  // one request per listener at a time: the connection waits for it
  proxy_.services().metrics.count(metrics::ProxyEvent::kBrokerDiscovery);
  spdlog::info("listener={}: a client names a broker no response named yet: asking the bootstrap {} for the cluster's brokers",
               listener_name(listener_index), bootstrap.to_string());
  d.run = std::make_unique<BrokerDiscovery>(&loop_, services(),
                                            [this, listener_index](std::vector<DiscoveredBroker> brokers, const std::string& error) {
                                              discovered(listener_index, std::move(brokers), error);
                                            });
  // Last: a connect that fails at once finishes within start(), and discovered() then moves the
  // discovery out of `d` and erases `d`.
  d.run->start(bootstrap, std::move(upstream_tls), timeout);
}

void Worker::discovered(size_t listener_index, std::vector<DiscoveredBroker> brokers, const std::string& error) {
  auto it = discoveries_.find(listener_index);
  if (it == discoveries_.end()) return;
  std::vector<connection::ClientConnection*> waiters = std::move(it->second.waiters);
  finished_discoveries_.push_back(std::move(it->second.run));
  discoveries_.erase(it);
  std::string learnt;
  for (const auto& b : brokers) {
    if (b.host.empty() || !cluster::broker_entry_problem(b.node_id, b.host, b.port).empty()) continue;  // as a response rewrite skips it
    proxy_.directory(listener_index).learn(b.node_id, b.host, b.port);
    learnt += (learnt.empty() ? "" : ", ") + std::to_string(b.node_id) + " at " + b.host + ":" + std::to_string(b.port);
  }
  if (learnt.empty()) {
    proxy_.services().metrics.count(metrics::ProxyEvent::kBrokerDiscoveryFailure);
    spdlog::warn("listener={}: the bootstrap named no broker ({}): {} waiting connection(s) are served at the bootstrap",
                 listener_name(listener_index), error.empty() ? "no valid broker entry" : error, waiters.size());
  } else {
    spdlog::info("listener={}: learnt brokers {} from the bootstrap", listener_name(listener_index), learnt);
  }
  for (connection::ClientConnection* waiter : waiters) waiter->brokers_discovered();
}

void Worker::tls_handshake_done() {
  if (trim_timer_.open() && trim_policy_.on_handshake(uv_now(&loop_))) schedule_trim();
}

void Worker::begin_drain(std::chrono::milliseconds deadline) {
  if (finished_) return;
  uv_timer_start(drain_timer_.get(), on_drain_deadline, static_cast<uint64_t>(deadline.count()), 0);
  if (draining_) return;
  draining_ = true;
  proxy_.balancer().exclude(index_);
  listeners_.clear();  // closes them
  std::vector<connection::ClientConnection*> open = connections_.snapshot();
  for (connection::ClientConnection* c : open) c->drain();
  maybe_finish_drain();
}

void Worker::on_drain_deadline(uv_timer_t* timer) {
  auto* self = static_cast<Worker*>(timer->data);
  if (!self->connections_.empty()) {
    spdlog::warn("worker {}: drain deadline passed, closing {} connections", self->index_, self->connections_.size());
  }
  std::vector<connection::ClientConnection*> open = self->connections_.snapshot();
  for (connection::ClientConnection* c : open) c->close({net::CloseCategory::kLimit, "drain deadline passed with requests in flight"});
}

void Worker::maybe_finish_drain() {
  if (!draining_ || finished_ || !connections_.empty()) return;
  finished_ = true;
  close_handles();
}

void Worker::close_handles() {
  listeners_.clear();
  listener_drains_.clear();
  std::lock_guard lock(tasks_mutex_);
  accepting_tasks_ = false;  // post() must not touch the wakeup handle from now on
  wakeup_.close();
  drain_timer_.close();
  trim_timer_.close();
  read_pressure_.stop();
  for (auto& [listener_index, d] : discoveries_) {
    d.run->cancel();
    finished_discoveries_.push_back(std::move(d.run));
  }
  discoveries_.clear();
}

}  // namespace kproxy::runtime
