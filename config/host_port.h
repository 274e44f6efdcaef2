// HostPort: a "host:port" endpoint as written in the config file ("[v6]:port" for IPv6).
#pragma once

#include <cstdint>
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

/// True for the any-address hosts (0.0.0.0, ::, empty) that cannot be handed to a client.
bool is_wildcard_host(std::string_view host);

}  // namespace kproxy::config
