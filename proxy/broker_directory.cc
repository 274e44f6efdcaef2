#include "proxy/broker_directory.h"

namespace kproxy::proxy {

uint16_t BrokerDirectory::offset_port(uint16_t base, int32_t node_id) {
  if (node_id < 0) return 0;
  int64_t port = int64_t{base} + node_id;
  return port <= 65535 ? static_cast<uint16_t>(port) : 0;
}

BrokerDirectory::Learned BrokerDirectory::learn(int32_t node_id, std::string_view host, int32_t port) {
  if (port < 0 || port > 65535) return {0, false};  // not an address: never store a truncated port
  std::lock_guard lock(mutex_);
  auto it = by_node_.find(node_id);
  if (it != by_node_.end()) {
    // A broker may move (restart on another host): new connections follow its latest address.
    if (it->second.real.host != host || it->second.real.port != port) {
      it->second.real.host = std::string(host);
      it->second.real.port = static_cast<uint16_t>(port);
    }
    return {it->second.proxy_port, !port_state_[node_id].listening};
  }
  uint16_t proxy_port = 0;
  if (ports_.scheme == config::BrokerPorts::Scheme::kNodeIdOffset) {
    proxy_port = offset_port(ports_.base, node_id);
  } else {
    uint32_t candidate = uint32_t{ports_.first} + next_in_order_;
    if (candidate <= ports_.last) {
      proxy_port = static_cast<uint16_t>(candidate);
      ++next_in_order_;
    }
  }
  if (proxy_port == 0) return {0, false};
  BrokerRoute route{node_id, config::HostPort{std::string(host), static_cast<uint16_t>(port)}, proxy_port};
  by_node_.emplace(node_id, route);
  node_by_port_.emplace(proxy_port, node_id);
  return {proxy_port, true};
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

std::optional<BrokerRoute> BrokerDirectory::route_for_port(uint16_t proxy_port) const {
  std::lock_guard lock(mutex_);
  auto it = node_by_port_.find(proxy_port);
  if (it == node_by_port_.end()) return std::nullopt;
  return by_node_.at(it->second);
}

std::vector<BrokerRoute> BrokerDirectory::routes() const {
  std::lock_guard lock(mutex_);
  std::vector<BrokerRoute> out;
  for (const auto& [id, route] : by_node_) out.push_back(route);
  return out;
}

}  // namespace kproxy::proxy
