// BrokerDirectory: for one listener, which kproxy port stands for which broker, and where that
// broker really is.
//
// Responses that name brokers (Metadata, FindCoordinator, DescribeCluster, KIP-951 endpoints...)
// teach the directory each node's real address; the directory hands back the kproxy port that
// replaces it (docs/protocol.md "Broker addresses"). Ports follow the listener's scheme: base + node id, or the next
// free port of a range in order of discovery. A connection accepted on a broker port goes to the
// real address learnt last for that node. Shared by all workers (a mutex; touched only when a
// response names brokers and when a broker-port connection is accepted, never per frame).
//
// An SNI listener (Scheme::kSni, config/sni_config.h) gives every node the listener's one
// advertised port and opens nothing: connections find their broker by name (route_for_node).
//
// Under `broker_ports: 0` (Scheme::kKernel) a new node's port is the kernel's pick: learn() binds
// a socket on the listener's host, port 0, and keeps it until the runtime listens on it
// (take_reserved_socket), so the port handed to clients is already held by kproxy.
//
// A port is never given to a broker when something else of this kproxy already claims it (another
// listener's bootstrap port, broker range or broker, the admin API: BrokerPortClaims), nor past
// the listener's max_broker_ports: such a node is refused, logged once and counted in
// kproxy_proxy_broker_ports_refused_total{reason} (issue #15 bug 4: without this a client of one
// listener was handed a port that reaches the other listener's cluster).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "proxy/metrics/labelled_counter.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/owned_descriptor.h"

namespace kproxy::cluster {

struct BrokerRoute {
  int32_t node_id = -1;
  config::HostPort real;    ///< where the broker is, as it advertises itself
  uint16_t proxy_port = 0;  ///< where clients reach it through kproxy
  bool listening = false;   ///< kproxy listens on proxy_port now (routes() only)
};

/// Why a broker node was given no port (the `reason` label of kproxy_proxy_broker_ports_refused_total).
enum class BrokerPortRefusal : uint8_t {
  kClaimed = 0,    ///< the port belongs to another listener or to the admin API
  kOverLimit = 1,  ///< the listener already gives max_broker_ports brokers a port
  kNoPort = 2,     ///< base + node id is past 65535, or the range is used up
  kCount = 3,
};
/// "claimed_by_other", "over_max_broker_ports", "no_port_left".
const char* broker_port_refusal_name(BrokerPortRefusal reason);
/// kproxy_proxy_broker_ports_refused_total{reason} in `metrics` (made on first call, every reason
/// at 0): nodes refused a port (each node once per listener), by reason.
metrics::LabelledCounter& broker_port_refusal_counter(metrics::ProxyMetrics& metrics);

/// Which part of this kproxy owns each port it listens on or may listen on, shared by the broker
/// directories of all listeners: the fixed claims of the config (bootstrap ports, broker port
/// ranges, admin.listen) and the base + node id ports handed out so far. Thread-safe.
class BrokerPortClaims {
 public:
  /// The fixed claims of `config`.
  explicit BrokerPortClaims(const config::Config& config);
  BrokerPortClaims() = default;

  /// Claims `port` for broker `node_id` of listener `listener`. "" when the port is this
  /// listener's to give (free, in its own range, or already this node's), else who owns it.
  std::string claim(uint16_t port, size_t listener, int32_t node_id);
  /// A listener added at run time (proxy/runtime/proxy.h add_listener) at index `listener`: its
  /// fixed claims, as the constructor makes them for the config's.
  void add_listener(size_t listener, const config::ListenerConfig& l);
  /// Listener `listener` closed: every port it claimed is free again.
  void remove_listener(size_t listener);

 private:
  struct Owner {
    size_t listener = 0;
    int32_t node_id = -1;  ///< -1: a fixed claim
    std::string what;      ///< "the bootstrap port of listener 'east'"
  };
  struct RangeClaim {
    uint16_t first = 0, last = 0;
    size_t listener = 0;
    std::string what;
  };
  std::vector<std::string> names_;  ///< listener names, by index
  std::mutex mutex_;
  std::map<uint16_t, Owner> ports_;
  std::vector<RangeClaim> ranges_;
};

class BrokerDirectory {
 public:
  /// `claims` (shared by the listeners of one Proxy; may be null in tests) and `listener` (this
  /// listener's index in the config) guard against handing out another listener's port;
  /// `listener_name` names it in log lines.
  /// `bind_host`: where kernel-picked broker ports are bound (the listener's listen host).
  /// `refused`: where refusals are counted (broker_port_refusal_counter; null: not counted).
  explicit BrokerDirectory(const config::BrokerPorts& ports, std::shared_ptr<BrokerPortClaims> claims = nullptr, size_t listener = 0,
                           std::string listener_name = {}, std::string bind_host = "127.0.0.1", metrics::LabelledCounter* refused = nullptr)
      : ports_(ports), claims_(std::move(claims)), listener_(listener), listener_name_(std::move(listener_name)),
        bind_host_(std::move(bind_host)), refused_(refused) {}

  struct Learned {
    uint16_t proxy_port = 0;  ///< 0: no port can be given (see `refused`)
    /// Open a listener for this port: the node is new, or no listener for it opened yet (the
    /// last attempt failed, e.g. another process held the port for a moment).
    bool new_port = false;
    /// When proxy_port is 0 for a valid address: why (for the client's close reason).
    std::string refused;
  };

  /// Records that `node_id` is really at host:port and returns its kproxy port.
  Learned learn(int32_t node_id, std::string_view host, int32_t port);

  /// A listener for `node_id`'s port is open: later learn() calls stop asking for one. Returns
  /// how many attempts had failed before.
  uint32_t opened(int32_t node_id);
  /// Opening `node_id`'s port failed: the next learn() asks again. Returns the failures so far.
  uint32_t open_failed(int32_t node_id);

  /// Scheme::kKernel: the bound socket of `node_id`'s port, handed over once (then an empty
  /// descriptor); the caller listens on it or lets it close.
  net::OwnedDescriptor take_reserved_socket(int32_t node_id);

  /// The route of the broker behind kproxy port `proxy_port`, if any.
  std::optional<BrokerRoute> route_for_port(uint16_t proxy_port) const;

  /// The route of broker `node_id`, if a response named it (an SNI listener's lookup by name).
  std::optional<BrokerRoute> route_for_node(int32_t node_id) const;

  /// Every node learnt so far, by node id.
  std::vector<BrokerRoute> routes() const;

  /// Scheme::kListenPort: the listener's bound port (known once it is bound: port 0).
  void set_listen_port(uint16_t port) {
    std::lock_guard lock(mutex_);
    ports_.base = port;
  }

  /// The port a node id gets under the base + node id scheme, or 0 if out of range.
  static uint16_t offset_port(uint16_t base, int32_t node_id);

 private:
  /// Every node at one port that is open already (SNI, or the listener's own port).
  bool one_port() const {
    return ports_.scheme == config::BrokerPorts::Scheme::kSni || ports_.scheme == config::BrokerPorts::Scheme::kListenPort;
  }
  // Records the refusal of `node_id`: logged and counted the first time only.
  Learned refuse(int32_t node_id, BrokerPortRefusal reason, std::string why);

  config::BrokerPorts ports_;
  std::shared_ptr<BrokerPortClaims> claims_;
  size_t listener_ = 0;
  std::string listener_name_;
  std::string bind_host_;
  metrics::LabelledCounter* refused_ = nullptr;
  static constexpr size_t kMaxRefusedNodesRemembered = 1024;
  std::set<int32_t> refused_nodes_;
  bool refusals_muted_ = false;
  mutable std::mutex mutex_;
  std::map<int32_t, BrokerRoute> by_node_;
  struct PortState {
    bool listening = false;
    uint32_t failed_opens = 0;
    net::OwnedDescriptor reserved;  ///< Scheme::kKernel: bound, not yet listened on
  };
  std::map<int32_t, PortState> port_state_;
  std::map<uint16_t, int32_t> node_by_port_;
  uint32_t next_in_order_ = 0;
};

}  // namespace kproxy::cluster
