// ListenerSpec: what a listening socket stands for (a listener's bootstrap port or one broker's
// port). The runtime's Listener binds it (proxy/runtime/listener.h); every connection accepted
// there shares it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kproxy::connection {

/// What a listening socket stands for.
struct ListenerSpec {
  size_t listener_index = 0;  ///< into Config::listeners
  std::string name;           ///< the listener's name from the config
  std::string host;           ///< address to bind
  uint16_t port = 0;
  int32_t node_id = -1;         ///< -1: the bootstrap port; else the broker this port stands for
  bool proxy_protocol = false;  ///< every connection starts with a PROXY v2 header (listeners[].proxy_protocol)

  bool is_broker_port() const { return node_id >= 0; }
  /// "kafka" or "kafka/node-3", for logs.
  std::string label() const { return is_broker_port() ? name + "/node-" + std::to_string(node_id) : name; }
};

}  // namespace kproxy::connection
