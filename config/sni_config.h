// SNI listeners (issue #33): one TLS port serves the bootstrap and every broker of a cluster; the
// server name a client's ClientHello carries (SNI, RFC 6066 section 3) says which one it wants.
//
//   listeners:
//     - name: kafka
//       listen: 0.0.0.0:9092
//       upstream: broker-1:9093
//       tls: { cert: /etc/kproxy/wildcard.pem, key: /etc/kproxy/wildcard.key }
//       sni:
//         bootstrap: kafka.example.com                 # the name clients bootstrap with
//         broker: broker-$(nodeId).kafka.example.com   # the name each broker is advertised as
//         advertised_port: 443      # port written into every broker address (default: the listen port)
//         unknown: refuse           # refuse (TLS alert unrecognized_name) | bootstrap
//         client_hello_timeout: 5s  # the ClientHello must be whole within this of the accept
//         max_client_hello_bytes: 16KiB
//
// Three addresses stay apart (config/README.md "SNI listeners"): where kproxy binds (`listen`),
// what it advertises (the broker pattern and advertised_port, e.g. a load balancer's 443 in front
// of kproxy's 9092), and the SNI kproxy sends to the real broker (its own advertised host, as on
// any TLS listener).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kproxy::config {

/// A broker host name pattern with one `$(nodeId)` in it (`$(listener)` is replaced when the
/// config loads): renders a node's name, and finds the node a server name stands for.
class BrokerHostPattern {
 public:
  BrokerHostPattern() = default;
  /// `pattern` with `$(listener)` already replaced and lower-cased; must hold exactly one
  /// `$(nodeId)` (make() checks).
  static std::optional<BrokerHostPattern> make(std::string_view pattern, std::string* error);

  /// The host name of broker `node_id`: "broker-3.kafka.example.com".
  std::string render(int32_t node_id) const;
  /// The node id `name` (normalised: lower case, no trailing dot) stands for, if it matches:
  /// the part in place of `$(nodeId)` must be a decimal node id (no sign, no leading zero).
  std::optional<int32_t> match(std::string_view name) const;
  /// The pattern as configured (after `$(listener)`), for logs.
  std::string text() const { return prefix_ + "$(nodeId)" + suffix_; }

  bool operator==(const BrokerHostPattern&) const = default;

 private:
  std::string prefix_;
  std::string suffix_;
};

/// What an SNI listener does with a ClientHello that names no host it knows, or none at all.
enum class UnknownServerName : uint8_t {
  kRefuse,     ///< TLS alert unrecognized_name (RFC 6066 section 3), then close
  kBootstrap,  ///< served as the bootstrap name
};

/// `listeners[].sni`.
struct SniConfig {
  std::string bootstrap;     ///< lower case, no trailing dot
  BrokerHostPattern broker;  ///< `$(listener)` replaced
  uint16_t advertised_port = 0;
  UnknownServerName unknown = UnknownServerName::kRefuse;
  std::chrono::milliseconds client_hello_timeout{5000};
  size_t max_client_hello_bytes = 16 * 1024;

  bool operator==(const SniConfig&) const = default;
};

/// Replaces every `$(listener)` of `pattern` with `listener_name`.
std::string replace_listener_placeholder(std::string_view pattern, std::string_view listener_name);

/// True for an IPv4 or IPv6 address literal: a name no client sends as SNI (RFC 6066 section 3).
bool is_address_literal(std::string_view name);

}  // namespace kproxy::config
