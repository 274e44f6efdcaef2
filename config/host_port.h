// HostPort: a "host:port" endpoint as written in the config file ("[v6]:port" for IPv6).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kproxy::config {

struct HostPort {
  std::string host;
  uint16_t port = 0;

  /// "host:port", with brackets around an IPv6 host.
  std::string to_string() const;
  bool operator==(const HostPort&) const = default;
};

/// Parses "host:port" or "[v6addr]:port". Port 1..65535 unless `allow_port_zero`.
/// On failure returns nullopt and, if `error` is given, says why.
std::optional<HostPort> parse_host_port(std::string_view text, std::string* error, bool allow_port_zero = false);

/// A listener's `advertise` (config/README.md, docs/toxiproxy.md "Kafka-aware proxies"):
/// comma-separated items, each a host (at most one: the host of every broker not listed) or
/// "N=host:port" (what clients are given for broker node N, e.g. the host-mapped port of a
/// container: "1=localhost:32771,2=localhost:32772"). A host:port without a node id is refused.
struct AdvertiseSpec {
  std::string host;                   ///< the bare host item ("" when none)
  std::map<int32_t, HostPort> nodes;  ///< node id -> what clients are told for it
};

/// Parses `text` as above. On failure returns nullopt and, if `error` is given, says why.
std::optional<AdvertiseSpec> parse_advertise(std::string_view text, std::string* error);

/// True for the any-address hosts (0.0.0.0, ::, empty) that cannot be handed to a client.
bool is_wildcard_host(std::string_view host);

}  // namespace kproxy::config
