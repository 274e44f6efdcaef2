// BrokerAddressRewrite: replaces every broker address in a response with the kproxy address
// that stands for that broker, so a client never learns (or connects to) a real broker.
//
// Where brokers are named (docs/protocol.md "Broker addresses"; KIP-951 for the NodeEndpoints):
//   Metadata            Brokers[].{NodeId,Host,Port}
//   FindCoordinator     v0-3 NodeId/Host/Port; v4+ Coordinators[].{NodeId,Host,Port}
//   DescribeCluster     Brokers[].{BrokerId,Host,Port}
//   Produce v10+        NodeEndpoints (tagged)     Fetch v16+   NodeEndpoints (tagged)
//   ShareFetch v1+      NodeEndpoints              ShareAcknowledge v1+  NodeEndpoints
//   DescribeQuorum v2+  Nodes[].Listeners[].{Host,Port}: controller endpoints kproxy does not
//                       proxy; a known broker address becomes its kproxy port, any other is
//                       masked as advertise-host:0 (unreachable, never the real address).
// A node given its own address (`advertise: "1=host:port"`, e.g. a container's host-mapped port)
// is written as that address; kproxy still listens on the node's kproxy port.
// On an SNI listener every broker's host becomes its name from the listener's broker pattern
// (broker-3.kafka.example.com) and its port the one advertised port (config/sni_config.h).
// Each real address is recorded in the listener's BrokerDirectory, which gives the node its
// kproxy port. A response without addresses (e.g. a Produce without NodeEndpoints) is left alone
// and forwarded as its original bytes.
//
// Produce and Fetch are the hot path, and their NodeEndpoints (a tagged field, tag 0: KIP-951,
// ProduceResponse.json / FetchResponse.json) are only sent when the broker redirects a client to a
// new leader. Their bodies are first walked with codec::scan_response (no allocation); only a body
// that does carry tag 0 is decoded and rewritten. The scan (error codes and their offsets) is
// handed back so that later stages (metrics) need not walk the body again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec/generated/response_scan.h"
#include "codec/reader.h"
#include "proxy/cluster/broker_directory.h"

namespace kproxy::cluster {

/// Why a broker entry of a response (node id, host, port) names no broker kproxy can route to: a
/// negative node id, a host longer than a DNS name, a port that is no TCP port; "" when it can.
std::string broker_entry_problem(int32_t node_id, std::string_view host, int64_t port);

class BrokerAddressRewrite {
 public:
  /// `advertise`: the host clients are told to connect to. `broker_names`: on an SNI listener
  /// (config/sni_config.h), each broker's host name instead (advertise then names only what is
  /// masked: a controller endpoint that is no broker).
  /// `advertise_nodes`: per node, the host:port clients are given instead of advertise:kproxy
  /// port (config/config.h ListenerConfig::advertise_nodes).
  BrokerAddressRewrite(BrokerDirectory& directory, std::string advertise, std::optional<config::BrokerHostPattern> broker_names = {},
                       std::map<int32_t, config::HostPort> advertise_nodes = {})
      : directory_(directory), advertise_(std::move(advertise)), broker_names_(std::move(broker_names)),
        advertise_nodes_(std::move(advertise_nodes)) {}

  /// True for the APIs whose responses can name brokers.
  static bool applies_to(int16_t api_key);

  /// A node that got its kproxy port while rewriting: its listener must be opened.
  struct NewBrokerPort {
    int32_t node_id;
    uint16_t port;
  };

  enum class Outcome : uint8_t {
    kUnchanged,  ///< forward the original bytes
    kRewritten,  ///< forward `out` (a whole frame, size prefix patched)
    kFailed,     ///< the response could not be decoded or an address has no port: close
  };

  /// Rewrites the response `frame` (size prefix included) of `api_key` at `api_version`, whose
  /// header has version `header_version` (0 or 1). Newly numbered brokers are appended to `added`.
  /// When the body was scanned instead of decoded and left unchanged, its scan is stored in
  /// `*scanned` (if given): valid for `frame`, for the pipeline's later stages.
  Outcome rewrite(int16_t api_key, int16_t api_version, int header_version, codec::Bytes frame, std::vector<uint8_t>& out,
                  std::vector<NewBrokerPort>& added, std::string& error, std::optional<codec::ResponseScan>* scanned = nullptr) const;

  /// The tag of KIP-951's NodeEndpoints in ProduceResponse (v10+) and FetchResponse (v16+).
  static constexpr uint32_t kNodeEndpointsTag = 0;

 private:
  BrokerDirectory& directory_;
  std::string advertise_;
  std::optional<config::BrokerHostPattern> broker_names_;
  std::map<int32_t, config::HostPort> advertise_nodes_;
};

}  // namespace kproxy::cluster
