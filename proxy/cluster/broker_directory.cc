#include "proxy/cluster/broker_directory.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/bound_socket.h"

namespace kproxy::cluster {

namespace {

std::vector<std::string> refusal_names() {
  std::vector<std::string> reasons;
  for (size_t i = 0; i < static_cast<size_t>(BrokerPortRefusal::kCount); ++i)
    reasons.push_back(broker_port_refusal_name(static_cast<BrokerPortRefusal>(i)));
  return reasons;
}

}  // namespace

const char* broker_port_refusal_name(BrokerPortRefusal reason) {
  switch (reason) {
    case BrokerPortRefusal::kClaimed: return "claimed_by_other";
    case BrokerPortRefusal::kOverLimit: return "over_max_broker_ports";
    case BrokerPortRefusal::kNoPort: return "no_port_left";
    case BrokerPortRefusal::kCount: break;
  }
  return "?";
}

metrics::LabelledCounter& broker_port_refusal_counter(metrics::ProxyMetrics& metrics) {
  return metrics.labelled_counter("kproxy_proxy_broker_ports_refused_total",
                                  "Broker nodes refused a kproxy port, by reason: claimed_by_other (another listener's or the admin "
                                  "API's port), over_max_broker_ports, no_port_left.",
                                  "reason", refusal_names());
}

BrokerPortClaims::BrokerPortClaims(const config::Config& config) {
  for (size_t i = 0; i < config.listeners.size(); ++i) {
    const auto& l = config.listeners[i];
    names_.push_back(l.name);
    // Port 0 is the kernel's pick: nothing for the config to claim.
    if (l.listen.port != 0) ports_.emplace(l.listen.port, Owner{i, -1, "the bootstrap port of listener '" + l.name + "'"});
    if (l.broker_ports.scheme == config::BrokerPorts::Scheme::kInOrder) {
      ranges_.push_back({l.broker_ports.first, l.broker_ports.last, i, "the broker port range of listener '" + l.name + "'"});
    }
  }
  // Last, so that a listener sharing the admin port (refused by the config loader) is named.
  if (config.admin.listen && config.admin.listen->port != 0)
    ports_.emplace(config.admin.listen->port, Owner{SIZE_MAX, -1, "the admin API"});
}

void BrokerPortClaims::add_listener(size_t listener, const config::ListenerConfig& l) {
  std::lock_guard lock(mutex_);
  if (names_.size() <= listener) names_.resize(listener + 1);
  names_[listener] = l.name;
  if (l.listen.port != 0) ports_[l.listen.port] = Owner{listener, -1, "the bootstrap port of listener '" + l.name + "'"};
  if (l.broker_ports.scheme == config::BrokerPorts::Scheme::kInOrder) {
    ranges_.push_back({l.broker_ports.first, l.broker_ports.last, listener, "the broker port range of listener '" + l.name + "'"});
  }
}

void BrokerPortClaims::remove_listener(size_t listener) {
  std::lock_guard lock(mutex_);
  for (auto it = ports_.begin(); it != ports_.end();) it = it->second.listener == listener ? ports_.erase(it) : std::next(it);
  ranges_.erase(std::remove_if(ranges_.begin(), ranges_.end(), [&](const RangeClaim& r) { return r.listener == listener; }), ranges_.end());
}

std::string BrokerPortClaims::claim(uint16_t port, size_t listener, int32_t node_id) {
  std::lock_guard lock(mutex_);
  for (const auto& r : ranges_) {
    if (port >= r.first && port <= r.last) return r.listener == listener ? "" : r.what;
  }
  auto [it, fresh] = ports_.emplace(port, Owner{listener, node_id, {}});
  if (fresh) return "";
  const Owner& owner = it->second;
  if (owner.listener == listener && owner.node_id == node_id) return "";
  if (!owner.what.empty()) return owner.what;
  return "broker node " + std::to_string(owner.node_id) + " of listener " +
         (owner.listener < names_.size() ? "'" + names_[owner.listener] + "'" : std::to_string(owner.listener));
}

BrokerDirectory::Learned BrokerDirectory::refuse(int32_t node_id, BrokerPortRefusal reason, std::string why) {
  // Caller holds mutex_. Every response naming the node lands here again: one line, one count.
  // The nodes remembered are bounded (a broker may name any number of ids): past the bound,
  // every refusal counts and one line says that later ones are not logged.
  const bool remembered = refused_nodes_.count(node_id) != 0;
  if (!remembered && refused_nodes_.size() >= kMaxRefusedNodesRemembered) {
    if (refused_) refused_->add(static_cast<size_t>(reason));
    if (!refusals_muted_) {
      refusals_muted_ = true;
      spdlog::error("listener={} refused {} broker nodes a port: further refusals are counted, not logged",
                    listener_name_.empty() ? "?" : listener_name_, refused_nodes_.size());
    }
  } else if (!remembered) {
    refused_nodes_.insert(node_id);
    if (refused_) refused_->add(static_cast<size_t>(reason));
    spdlog::error(
        "listener={} refuses broker node {}: {} (clients of this listener are not given that broker; fix the config, "
        "see config/README.md \"Ports\")",
        listener_name_.empty() ? "?" : listener_name_, node_id, why);
  }
  return {0, false, std::move(why)};
}

uint16_t BrokerDirectory::offset_port(uint16_t base, int32_t node_id) {
  if (node_id < 0) return 0;
  int64_t port = int64_t{base} + node_id;
  return port <= 65535 ? static_cast<uint16_t>(port) : 0;
}

BrokerDirectory::Learned BrokerDirectory::learn(int32_t node_id, std::string_view host, int32_t port) {
  if (port < 0 || port > 65535) return {0, false, {}};  // not an address: never store a truncated port
  std::lock_guard lock(mutex_);
  auto it = by_node_.find(node_id);
  if (it != by_node_.end()) {
    // A broker may move (restart on another host): new connections follow its latest address.
    if (it->second.real.host != host || it->second.real.port != port) {
      it->second.real.host = std::string(host);
      it->second.real.port = static_cast<uint16_t>(port);
    }
    // An SNI listener opens no port per broker: its one port serves every node.
    return {it->second.proxy_port, !one_port() && !port_state_[node_id].listening, {}};
  }
  if (node_id < 0) return {0, false, {}};
  if (by_node_.size() >= ports_.max_ports) {
    return refuse(node_id, BrokerPortRefusal::kOverLimit,
                  "this listener already gives max_broker_ports = " + std::to_string(ports_.max_ports) + " brokers a port");
  }
  if (ports_.scheme == config::BrokerPorts::Scheme::kListenPort) {
    // One broker behind the listener's own port: its bootstrap connections reach it already.
    if (!by_node_.empty()) {
      return refuse(node_id, BrokerPortRefusal::kOverLimit,
                    "broker_ports: listen serves a single broker (node " + std::to_string(by_node_.begin()->first) +
                        " has the port): give broker_ports or broker_port_range for a cluster");
    }
    by_node_.emplace(node_id, BrokerRoute{node_id, config::HostPort{std::string(host), static_cast<uint16_t>(port)}, ports_.base});
    return {ports_.base, false, {}};
  }
  if (ports_.scheme == config::BrokerPorts::Scheme::kSni) {
    // Every broker at the listener's one advertised port, told apart by its host name
    // (config/sni_config.h): no port to claim, none to open.
    by_node_.emplace(node_id, BrokerRoute{node_id, config::HostPort{std::string(host), static_cast<uint16_t>(port)}, ports_.base});
    return {ports_.base, false, {}};
  }
  uint16_t proxy_port = 0;
  if (ports_.scheme == config::BrokerPorts::Scheme::kNodeIdOffset) {
    proxy_port = offset_port(ports_.base, node_id);
    if (proxy_port == 0) {
      return refuse(node_id, BrokerPortRefusal::kNoPort,
                    "broker_ports base " + std::to_string(ports_.base) + " + node id " + std::to_string(node_id) + " is past port 65535");
    }
  } else if (ports_.scheme == config::BrokerPorts::Scheme::kKernel) {
    net::BoundSocket bound = net::bind_tcp_socket(bind_host_, 0);
    if (!bound.socket) return refuse(node_id, BrokerPortRefusal::kNoPort, "no port could be bound: " + bound.error);
    proxy_port = bound.port;
    port_state_[node_id].reserved = std::move(bound.socket);
  } else {
    uint32_t candidate = uint32_t{ports_.first} + next_in_order_;
    if (candidate > ports_.last) {
      return refuse(node_id, BrokerPortRefusal::kNoPort,
                    "broker_port_range " + std::to_string(ports_.first) + "-" + std::to_string(ports_.last) + " is used up");
    }
    proxy_port = static_cast<uint16_t>(candidate);
  }
  if (claims_) {
    if (std::string owner = claims_->claim(proxy_port, listener_, node_id); !owner.empty()) {
      return refuse(node_id, BrokerPortRefusal::kClaimed, "its port " + std::to_string(proxy_port) + " is " + owner);
    }
  }
  if (ports_.scheme == config::BrokerPorts::Scheme::kInOrder) ++next_in_order_;
  BrokerRoute route{node_id, config::HostPort{std::string(host), static_cast<uint16_t>(port)}, proxy_port};
  by_node_.emplace(node_id, route);
  node_by_port_.emplace(proxy_port, node_id);
  return {proxy_port, true, {}};
}

uint32_t BrokerDirectory::opened(int32_t node_id) {
  std::lock_guard lock(mutex_);
  auto& state = port_state_[node_id];
  state.listening = true;
  return state.failed_opens;
}

uint32_t BrokerDirectory::open_failed(int32_t node_id) {
  std::lock_guard lock(mutex_);
  auto& state = port_state_[node_id];
  if (state.listening) return state.failed_opens;  // another worker's listener is open already
  return ++state.failed_opens;
}

net::OwnedDescriptor BrokerDirectory::take_reserved_socket(int32_t node_id) {
  std::lock_guard lock(mutex_);
  auto it = port_state_.find(node_id);
  return it == port_state_.end() ? net::OwnedDescriptor() : std::move(it->second.reserved);
}

std::optional<BrokerRoute> BrokerDirectory::route_for_port(uint16_t proxy_port) const {
  std::lock_guard lock(mutex_);
  auto it = node_by_port_.find(proxy_port);
  if (it == node_by_port_.end()) return std::nullopt;
  return by_node_.at(it->second);
}

std::optional<BrokerRoute> BrokerDirectory::route_for_node(int32_t node_id) const {
  std::lock_guard lock(mutex_);
  auto it = by_node_.find(node_id);
  if (it == by_node_.end()) return std::nullopt;
  return it->second;
}

std::vector<BrokerRoute> BrokerDirectory::routes() const {
  std::lock_guard lock(mutex_);
  std::vector<BrokerRoute> out;
  for (const auto& [id, route] : by_node_) {
    out.push_back(route);
    auto state = port_state_.find(id);
    out.back().listening = one_port() || (state != port_state_.end() && state->second.listening);
  }
  return out;
}

}  // namespace kproxy::cluster
