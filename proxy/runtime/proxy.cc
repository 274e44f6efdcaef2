#include "proxy/runtime/proxy.h"

#include <unistd.h>

#include <future>
#include <memory>
#include <mutex>

#include <spdlog/spdlog.h>

#include "proxy/chaos/config_sections.h"
#include "proxy/connection/sni_route.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/bound_socket.h"
#include "proxy/net/owned_descriptor.h"
#include "proxy/net/self_connection.h"
#include "proxy/runtime/startup_check.h"
#include "proxy/util/bound_report.h"
#include "proxy/util/logging.h"

namespace kproxy::runtime {
namespace {
const char* const kWorkerConnections = "kproxy_worker_connections";
const char* const kPartialFrameBytes = "kproxy_partial_frame_bytes";
}  // namespace

void Proxy::export_gauges() {
  // Readers hold the balancer and read the budget through a weak token: ~Proxy replaces them
  // (registering a name again replaces its reader), a scrape after it reads nothing.
  services_.metrics.add_gauge(kWorkerConnections, "Client connections each worker thread serves now (spread by the connection balancer).",
                              "worker", [b = std::weak_ptr<ConnectionBalancer>(balancer_)] {
                                std::vector<std::pair<std::string, double>> out;
                                auto balancer = b.lock();
                                for (size_t w = 0; balancer && w < balancer->workers(); ++w)
                                  out.emplace_back(std::to_string(w), static_cast<double>(balancer->load(w)));
                                return out;
                              });
  services_.metrics.add_gauge(
      kPartialFrameBytes,
      "Bytes of frames split across reads that kproxy holds now, requests and responses (limits.max_buffered_frame_bytes "
      "counts them; above it the clients holding the most are paused: kproxy_proxy_reads_paused).",
      "", [alive = std::weak_ptr<const void>(alive_), budget = &frame_budget_] {
        auto held = alive.lock();  // the Proxy lives while the reading lasts
        return std::vector<std::pair<std::string, double>>{{"", held ? static_cast<double>(budget->used()) : 0.0}};
      });
}

Proxy::Proxy(std::shared_ptr<const config::Config> config, const stage::Services& services)
    : services_(services), read_pauses_(services.metrics), port_refusals_(cluster::broker_port_refusal_counter(services.metrics)),
      config_(std::move(config)), file_listeners_(config_->listeners.size()), slot_count_(file_listeners_ + kMaxRuntimeListeners),
      directory_slots_(new std::atomic<cluster::BrokerDirectory*>[slot_count_]),
      rewrite_slots_(new std::atomic<const cluster::BrokerAddressRewrite*>[slot_count_]), runtime_(kMaxRuntimeListeners),
      live_rules_(services.clock), frame_budget_(config_->limits.max_buffered_frame_bytes),
      streamed_budget_(config_->limits.max_streamed_request_bytes), preferred_upstream_(new std::atomic<uint32_t>[slot_count_]),
      listener_ports_(new std::atomic<uint16_t>[slot_count_]) {
  for (size_t i = 0; i < slot_count_; ++i) {
    preferred_upstream_[i] = 0;
    listener_ports_[i] = 0;
    directory_slots_[i] = nullptr;
    rewrite_slots_[i] = nullptr;
  }
  // One claim table for all listeners: a broker port of one never reaches another's cluster.
  claims_ = std::make_shared<cluster::BrokerPortClaims>(*config_);
  for (size_t i = 0; i < config_->listeners.size(); ++i) {
    const auto& listener = config_->listeners[i];
    owned_directories_.push_back(std::make_unique<cluster::BrokerDirectory>(listener.broker_ports, claims_, i, listener.name,
                                                                            listener.listen.host, &port_refusals_));
    std::optional<config::BrokerHostPattern> broker_names;
    if (listener.sni) {
      broker_names = listener.sni->broker;
      connection::sni_outcome_counter(services_.metrics);  // every outcome scraped from the start, at 0
    }
    owned_rewrites_.push_back(std::make_unique<cluster::BrokerAddressRewrite>(*owned_directories_.back(), listener.advertise,
                                                                              std::move(broker_names), listener.advertise_nodes));
    directory_slots_[i] = owned_directories_.back().get();
    rewrite_slots_[i] = owned_rewrites_.back().get();
  }
}

Proxy::~Proxy() {
  join();
  workers_.clear();
  alive_.reset();  // the gauges' readers read nothing from now on
}

std::string Proxy::start() {
  {
    // The same checks as `kproxy check-config` (proxy/runtime/startup_check.h).
    PreparedConfig prepared;
    if (std::string error = prepare_config(*config_, prepared); !error.empty()) return error;
    if (std::string error = with_scenario(prepared.chaos, *config_); !error.empty()) return error;
    live_rules_.replace(std::move(prepared.chaos.rules), std::move(prepared.chaos.api_versions));
    std::lock_guard lock(config_mutex_);
    tls_ = std::move(prepared.tls);
  }
  unsigned n = config_->worker_count();
  balancer_ = std::make_shared<ConnectionBalancer>(n);
  export_gauges();
  for (unsigned i = 0; i < n; ++i) workers_.push_back(std::make_unique<Worker>(*this, i));
  for (size_t li = 0; li < config_->listeners.size(); ++li) {
    const auto& l = config_->listeners[li];
    // Bound here, before any worker listens, so that port 0 (the kernel's pick) is known; every
    // worker then listens on a duplicate of the one socket (proxy/runtime/listener.h).
    net::BoundSocket bound = net::bind_tcp_socket(l.listen.host, l.listen.port);
    if (!bound.socket) return "listener '" + l.name + "': " + bound.error;
    connection::ListenerSpec spec{li, l.name, l.listen.host, bound.port, -1, l.proxy_protocol};
    for (auto& w : workers_) {
      std::string error = w->open_listener(spec, bound.socket.get());
      if (!error.empty()) return "listener '" + l.name + "': " + error;
    }
    listener_ports_[li] = bound.port;
    if (l.broker_ports.scheme == config::BrokerPorts::Scheme::kListenPort) directory(li).set_listen_port(bound.port);
    const std::string address = config::HostPort{l.listen.host, bound.port}.to_string();
    util::report_bound("listener", l.name, address);
    std::string bootstrap;
    for (const auto& u : l.upstreams) bootstrap += (bootstrap.empty() ? "" : ",") + u.to_string();
    if (const auto& t = tls_[li].clients) spdlog::info("listener={} clients speak TLS: {}", l.name, t->summary());
    if (const auto& t = tls_[li].upstream) spdlog::info("listener={} brokers are reached over TLS: {}", l.name, t->summary());
    std::string broker_ports;
    switch (l.broker_ports.scheme) {
      case config::BrokerPorts::Scheme::kNodeIdOffset: broker_ports = "port " + std::to_string(l.broker_ports.base) + " + node id"; break;
      case config::BrokerPorts::Scheme::kInOrder:
        broker_ports = "ports " + std::to_string(l.broker_ports.first) + "-" + std::to_string(l.broker_ports.last) + " in order";
        break;
      case config::BrokerPorts::Scheme::kKernel: broker_ports = "ports the kernel picks (reported as they open)"; break;
      case config::BrokerPorts::Scheme::kSni: break;
      case config::BrokerPorts::Scheme::kListenPort: broker_ports = "port " + std::to_string(bound.port) + " (a single broker)"; break;
    }
    if (l.sni) {
      // config/README.md "SNI listeners": where kproxy binds, what it advertises, what it routes by.
      spdlog::info("listener={} SNI listener on {}: bootstrap name {}, brokers advertised as {}:{}, unknown or missing names {}", l.name,
                   address, l.sni->bootstrap, l.sni->broker.text(), l.sni->advertised_port,
                   l.sni->unknown == config::UnknownServerName::kRefuse ? "refused (TLS alert unrecognized_name)" : "served as bootstrap");
      continue;
    }
    spdlog::info("listener={} listening on {} (upstream {}, brokers advertised as {} {})", l.name, address, bootstrap, l.advertise,
                 broker_ports);
  }
  running_workers_ = n;
  for (auto& w : workers_) w->start();
  started_.store(true, std::memory_order_release);
  spdlog::info("kproxy running with {} workers", n);
  return "";
}

void Proxy::drain(std::optional<std::chrono::milliseconds> deadline) {
  auto d = deadline ? *deadline : config()->drain_timeout;
  spdlog::info("draining: no new connections; closing the rest within {} ms", d.count());
  for (auto& w : workers_) {
    Worker* worker = w.get();
    worker->post([worker, d] { worker->begin_drain(d); });
  }
}

void Proxy::join() {
  for (auto& w : workers_) w->join();
}

void Proxy::worker_stopped() {
  if (running_workers_.fetch_sub(1) == 1 && on_stopped_) on_stopped_();
}

std::string Proxy::reload(std::shared_ptr<const config::Config> next) {
  auto current = config();
  if (next->listeners.size() != current->listeners.size()) return "the number of listeners changed: restart kproxy to apply";
  for (size_t i = 0; i < next->listeners.size(); ++i) {
    const auto& a = current->listeners[i];
    const auto& b = next->listeners[i];
    if (a.name != b.name || a.listen != b.listen || a.advertise != b.advertise || a.advertise_nodes != b.advertise_nodes ||
        !(a.broker_ports == b.broker_ports) || a.proxy_protocol != b.proxy_protocol || a.sni != b.sni) {
      return "listener '" + a.name +
             "' changed its name, listen address, advertise host, broker ports, proxy_protocol or sni: restart kproxy to apply";
    }
  }
  if (next->worker_count() != workers_.size()) return "the worker count changed: restart kproxy to apply";
  // Certificates and keys are read again: renewed files apply to new connections; a file that
  // does not load refuses the reload before anything changed.
  PreparedConfig prepared;
  if (std::string error = prepare_config(*next, prepared); !error.empty()) return error;
  for (const auto& w : unmatched_listener_scopes(*next, prepared.chaos)) spdlog::warn("{}: {}", next->source, w);
  if (std::string error = with_scenario(prepared.chaos, *next); !error.empty()) return error;
  live_rules_.replace(std::move(prepared.chaos.rules), std::move(prepared.chaos.api_versions));
  frame_budget_.set_limit(next->limits.max_buffered_frame_bytes);
  streamed_budget_.set_limit(next->limits.max_streamed_request_bytes);
  {
    std::lock_guard lock(config_mutex_);
    config_ = next;
    tls_ = std::move(prepared.tls);
  }
  util::configure_logging(next->log);
  spdlog::info("config reloaded from {} (upstreams, limits, timeouts, logging and TLS certificates apply to new connections)",
               next->source);
  return "";
}

std::string Proxy::with_scenario(chaos::ChaosConfig& chaos, const config::Config& config) const {
  std::shared_ptr<const chaos::Scenario> scenario;
  {
    std::lock_guard lock(config_mutex_);
    scenario = scenario_;
  }
  return scenario ? chaos::apply_scenario(chaos, *scenario, config.limits.max_fault_rules) : "";
}

std::string Proxy::set_scenario(std::shared_ptr<const chaos::Scenario> scenario) {
  auto current = config();
  PreparedConfig prepared;
  // The config's own rules and policy again, then the scenario's: applying one replaces the last,
  // and rules put through the admin API since are dropped with it.
  if (std::string error = prepare_config(*current, prepared); !error.empty()) return error;
  if (scenario) {
    if (std::string error = chaos::apply_scenario(prepared.chaos, *scenario, current->limits.max_fault_rules); !error.empty()) return error;
  }
  {
    std::lock_guard lock(config_mutex_);
    scenario_ = scenario;
  }
  live_rules_.replace(std::move(prepared.chaos.rules), std::move(prepared.chaos.api_versions));
  if (scenario) {
    spdlog::info("scenario '{}' v{} applied from {}: {} rules, {} ApiVersions entries ({})", scenario->name, scenario->version,
                 scenario->source, scenario->chaos.rules.size(), scenario->chaos.api_versions.spec.size(), scenario->description);
  } else {
    spdlog::info("scenario cleared: the config's rules and ApiVersions policy only");
  }
  return "";
}

std::shared_ptr<const chaos::Scenario> Proxy::scenario() const {
  std::lock_guard lock(config_mutex_);
  return scenario_;
}

std::shared_ptr<const config::Config> Proxy::config() const {
  std::lock_guard lock(config_mutex_);
  return config_;
}

tls::ListenerTls Proxy::listener_tls(size_t listener_index) const {
  std::lock_guard lock(config_mutex_);
  return listener_index < tls_.size() ? tls_[listener_index] : tls::ListenerTls{};
}

void Proxy::open_broker_port(Worker& caller, size_t listener_index, int32_t node_id, uint16_t port) {
  auto listener = listener_config(listener_index);
  if (!listener) return;  // a run-time listener removed since
  const auto& l = *listener;
  connection::ListenerSpec spec{listener_index, l.name, l.listen.host, port, node_id, l.proxy_protocol};
  auto& directory = this->directory(listener_index);
  auto route = directory.route_for_port(port);
  // A draining worker has closed its listeners and must not open new ones (its loop would never end).
  if (caller.draining()) return;
  // A broker that advertises kproxy's own address (its advertised.listeners name the proxy) would
  // make every client connection to this port connect to kproxy again: no port for it. Named once
  // per node; asked again when the next response names the node (BrokerDirectory::learn).
  if (route && services_.self_connections.advertises_kproxy(route->real.host, route->real.port, l.listen.host, port)) {
    services_.metrics.count(metrics::ProxyEvent::kSelfConnection);
    if (directory.open_failed(node_id) <= 1) {
      spdlog::error(
          "listener={} opens no port for broker node {}: the broker advertises {}, which is kproxy itself (the brokers' "
          "advertised.listeners must name the brokers, not the proxy); clients of this listener cannot reach node {}",
          spec.label(), node_id, route->real.to_string(), node_id);
    }
    return;
  }
  // broker_ports: 0: the directory bound the port when it picked it; listen on that socket.
  net::OwnedDescriptor reserved = directory.take_reserved_socket(node_id);
  std::string error = caller.listens_on(port) ? "" : caller.open_listener(spec, reserved ? reserved.get() : -1);
  if (!error.empty()) {
    services_.metrics.count(metrics::ProxyEvent::kBrokerPortFailure);
    // Not for good: the next response naming the node asks again (BrokerDirectory::learn), so a
    // port another process held for a moment (an ephemeral source port, say) does not cut the
    // broker off from the clients for the rest of kproxy's life. Logged once as an error.
    uint32_t failures = directory.open_failed(node_id);
    if (failures <= 1) {
      spdlog::error("listener={} cannot open port {} for broker node {}: {} (tried again when a response names the node)", spec.label(),
                    port, node_id, error);
    } else {
      spdlog::debug("listener={} cannot open port {} for broker node {} (attempt {}): {}", spec.label(), port, node_id, failures, error);
    }
    return;
  }
  uint32_t failed_before = directory.opened(node_id);
  services_.metrics.count(metrics::ProxyEvent::kBrokerPortOpened);
  spdlog::info("listener={} opened {}:{} for broker node {} at {}{}", spec.label(), l.advertise, port, node_id,
               route ? route->real.to_string() : "?",
               failed_before ? " after " + std::to_string(failed_before) + " failed attempts" : std::string());
  util::report_bound("broker", spec.label(), config::HostPort{l.listen.host, port}.to_string());
  // The other workers listen on the same socket; the duplicate travels with the tasks, so it
  // stays valid even if the caller's listener closes first.
  auto bound = std::make_shared<net::OwnedDescriptor>(::dup(caller.listener_fd(port)));
  for (auto& w : workers_) {
    if (w.get() == &caller) continue;
    Worker* worker = w.get();
    worker->post([worker, spec, bound] {
      if (worker->draining() || worker->listens_on(spec.port)) return;
      std::string e = !*bound ? std::string("cannot share the listening socket") : worker->open_listener(spec, bound->get());
      if (!e.empty()) spdlog::error("listener={} worker {} cannot open port {}: {}", spec.label(), worker->index(), spec.port, e);
    });
  }
}

uint16_t Proxy::listener_port(size_t listener_index) const {
  return listener_index < slot_count_ ? listener_ports_[listener_index].load() : 0;
}

config::HostPort Proxy::bootstrap_target(const config::Config& config, size_t listener_index) const {
  std::shared_ptr<const config::ListenerConfig> runtime;
  const config::ListenerConfig* l = nullptr;
  if (listener_index < config.listeners.size()) {
    l = &config.listeners[listener_index];
  } else {
    runtime = listener_config(listener_index);
    if (!runtime) return {};  // removed since: the connect fails, the client retries elsewhere
    l = runtime.get();
  }
  const auto& upstreams = l->upstreams;
  if (upstreams.empty()) return l->upstream;
  return upstreams[preferred_upstream_[listener_index].load(std::memory_order_relaxed) % upstreams.size()];
}

void Proxy::bootstrap_unreachable(size_t listener_index, const config::HostPort& target) {
  auto listener = listener_config(listener_index);
  if (!listener) return;
  const auto& upstreams = listener->upstreams;
  if (upstreams.size() < 2) return;
  uint32_t current = preferred_upstream_[listener_index].load();
  if (!(upstreams[current % upstreams.size()] == target)) return;  // someone moved on already
  if (preferred_upstream_[listener_index].compare_exchange_strong(current, current + 1)) {
    spdlog::warn("listener={} bootstrap {} unreachable: new connections go to {}", listener->name, target.to_string(),
                 upstreams[(current + 1) % upstreams.size()].to_string());
  }
}

std::shared_ptr<const config::ListenerConfig> Proxy::listener_config(size_t listener_index) const {
  std::lock_guard lock(config_mutex_);
  if (listener_index < file_listeners_) return std::shared_ptr<const config::ListenerConfig>(config_, &config_->listeners[listener_index]);
  size_t k = listener_index - file_listeners_;
  return k < runtime_.size() ? runtime_[k] : nullptr;
}

std::vector<std::pair<size_t, std::shared_ptr<const config::ListenerConfig>>> Proxy::runtime_listeners() const {
  std::lock_guard lock(config_mutex_);
  std::vector<std::pair<size_t, std::shared_ptr<const config::ListenerConfig>>> out;
  for (size_t k = 0; k < runtime_.size(); ++k) {
    if (runtime_[k]) out.emplace_back(file_listeners_ + k, runtime_[k]);
  }
  return out;
}

void Proxy::on_every_worker(const std::function<void(Worker&)>& task) {
  // Set when the last copy of the task goes: run, or dropped by a worker whose loop has ended.
  struct Done {
    std::promise<void> promise;
    ~Done() { promise.set_value(); }
  };
  std::vector<std::future<void>> waits;
  for (auto& w : workers_) {
    auto done = std::make_shared<Done>();
    waits.push_back(done->promise.get_future());
    Worker* worker = w.get();
    worker->post([worker, task, done] { task(*worker); });
  }
  for (auto& f : waits) f.wait_for(std::chrono::seconds(10));
}

Proxy::AddedListener Proxy::add_listener(config::ListenerConfig l) {
  std::lock_guard serial(runtime_mutex_);
  AddedListener out;
  if (!started() || workers_.empty() || workers_.front()->draining()) return {"kproxy is not running (starting or shutting down)", 503};
  size_t slot = kMaxRuntimeListeners;
  {
    std::lock_guard lock(config_mutex_);
    for (const auto& f : config_->listeners) {
      if (f.name == l.name) return {"listener '" + l.name + "' exists in the config file", 409};
    }
    for (size_t n = 0; n < kMaxRuntimeListeners; ++n) {
      size_t k = (next_runtime_slot_ + n) % kMaxRuntimeListeners;
      if (runtime_[k] && runtime_[k]->name == l.name) return {"listener '" + l.name + "' exists", 409};
      if (!runtime_[k] && slot == kMaxRuntimeListeners) slot = k;
    }
  }
  if (slot == kMaxRuntimeListeners) {
    return {"too many listeners added at run time: at most " + std::to_string(kMaxRuntimeListeners) + " at once", 409};
  }
  const size_t index = file_listeners_ + slot;
  net::BoundSocket bound = net::bind_tcp_socket(l.listen.host, l.listen.port);
  if (!bound.socket) return {"listener '" + l.name + "': " + bound.error, 409};
  if (l.broker_ports.scheme == config::BrokerPorts::Scheme::kListenPort) l.broker_ports.base = bound.port;
  if (l.upstreams.empty()) l.upstreams.push_back(l.upstream);
  owned_directories_.push_back(
      std::make_unique<cluster::BrokerDirectory>(l.broker_ports, claims_, index, l.name, l.listen.host, &port_refusals_));
  owned_rewrites_.push_back(
      std::make_unique<cluster::BrokerAddressRewrite>(*owned_directories_.back(), l.advertise, std::nullopt, l.advertise_nodes));
  claims_->remove_listener(index);  // what a listener of this slot before claimed
  claims_->add_listener(index, l);
  directory_slots_[index].store(owned_directories_.back().get(), std::memory_order_release);
  rewrite_slots_[index].store(owned_rewrites_.back().get(), std::memory_order_release);
  preferred_upstream_[index] = 0;
  listener_ports_[index] = bound.port;
  auto shared = std::make_shared<const config::ListenerConfig>(l);
  {
    std::lock_guard lock(config_mutex_);
    runtime_[slot] = shared;
    next_runtime_slot_ = (slot + 1) % kMaxRuntimeListeners;
  }
  connection::ListenerSpec spec{index, l.name, l.listen.host, bound.port, -1, l.proxy_protocol};
  auto errors = std::make_shared<std::vector<std::string>>();
  auto errors_mutex = std::make_shared<std::mutex>();
  const int fd = bound.socket.get();
  on_every_worker([spec, fd, errors, errors_mutex](Worker& w) {
    std::string e = w.draining() ? std::string("the worker is shutting down") : w.open_listener(spec, fd);
    if (e.empty()) return;
    std::lock_guard lock(*errors_mutex);
    errors->push_back(std::move(e));
  });
  {
    std::lock_guard lock(*errors_mutex);
    if (!errors->empty()) {
      std::string why = errors->front();
      on_every_worker([index](Worker& w) { w.close_listener(index, std::chrono::milliseconds(0)); });
      {
        std::lock_guard lock2(config_mutex_);
        runtime_[slot] = nullptr;
      }
      claims_->remove_listener(index);
      listener_ports_[index] = 0;
      return {"listener '" + l.name + "': " + why, 409};
    }
  }
  const std::string address = config::HostPort{l.listen.host, bound.port}.to_string();
  util::report_bound("listener", l.name, address);
  std::string bootstrap;
  for (const auto& u : l.upstreams) bootstrap += (bootstrap.empty() ? "" : ",") + u.to_string();
  spdlog::info("listener={} added at run time: listening on {} (upstream {}, brokers advertised as {})", l.name, address, bootstrap,
               l.advertise);
  out.index = index;
  out.port = bound.port;
  return out;
}

bool Proxy::remove_listener(const std::string& name, std::chrono::milliseconds drain) {
  std::lock_guard serial(runtime_mutex_);
  size_t index = 0;
  {
    std::lock_guard lock(config_mutex_);
    size_t k = 0;
    while (k < runtime_.size() && !(runtime_[k] && runtime_[k]->name == name)) ++k;
    if (k == runtime_.size()) return false;
    runtime_[k] = nullptr;
    index = file_listeners_ + k;
  }
  on_every_worker([index, drain](Worker& w) { w.close_listener(index, drain); });
  claims_->remove_listener(index);
  listener_ports_[index] = 0;
  spdlog::info("listener={} removed at run time: no new connections; open ones {}", name,
               drain.count() ? "drain for up to " + std::to_string(drain.count()) + " ms" : std::string("closed"));
  return true;
}

bool Proxy::reserve_connection() {
  auto limit = static_cast<int64_t>(config()->limits.max_connections);
  int64_t now = open_connections_.fetch_add(1) + 1;
  if (now > limit) {
    open_connections_.fetch_sub(1);
    return false;
  }
  return true;
}

void Proxy::release_connection() { open_connections_.fetch_sub(1); }

}  // namespace kproxy::runtime
