// BrokerDirectory: for one listener, which kproxy port stands for which broker, and where that
// broker really is.
//
// Responses that name brokers (Metadata, FindCoordinator, DescribeCluster, KIP-951 endpoints...)
// teach the directory each node's real address; the directory hands back the kproxy port that
// replaces it (docs/protocol.md "Broker addresses"). Ports follow the listener's scheme: base + node id, or the next
// free port of a range in order of discovery. A connection accepted on a broker port goes to the
// real address learnt last for that node. Shared by all workers (a mutex; touched only when a
// response names brokers and when a broker-port connection is accepted, never per frame).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace kproxy::proxy {

struct BrokerRoute {
  int32_t node_id = -1;
  config::HostPort real;    ///< where the broker is, as it advertises itself
  uint16_t proxy_port = 0;  ///< where clients reach it through kproxy
};

class BrokerDirectory {
 public:
  explicit BrokerDirectory(const config::BrokerPorts& ports) : ports_(ports) {}

  struct Learned {
    uint16_t proxy_port = 0;  ///< 0: no port can be given (node id out of range, range exhausted)
    /// Open a listener for this port: the node is new, or no listener for it opened yet (the
    /// last attempt failed, e.g. another process held the port for a moment).
    bool new_port = false;
  };

  /// Records that `node_id` is really at host:port and returns its kproxy port.
  Learned learn(int32_t node_id, std::string_view host, int32_t port);

  /// A listener for `node_id`'s port is open: later learn() calls stop asking for one. Returns
  /// how many attempts had failed before.
  uint32_t opened(int32_t node_id);
  /// Opening `node_id`'s port failed: the next learn() asks again. Returns the failures so far.
  uint32_t open_failed(int32_t node_id);

  /// The route of the broker behind kproxy port `proxy_port`, if any.
  std::optional<BrokerRoute> route_for_port(uint16_t proxy_port) const;

  /// Every node learnt so far, by node id.
  std::vector<BrokerRoute> routes() const;

  /// The port a node id gets under the base + node id scheme, or 0 if out of range.
  static uint16_t offset_port(uint16_t base, int32_t node_id);

 private:
  config::BrokerPorts ports_;
  mutable std::mutex mutex_;
  std::map<int32_t, BrokerRoute> by_node_;
  struct PortState {
    bool listening = false;
    uint32_t failed_opens = 0;
  };
  std::map<int32_t, PortState> port_state_;
  std::map<uint16_t, int32_t> node_by_port_;
  uint32_t next_in_order_ = 0;
};

}  // namespace kproxy::proxy
