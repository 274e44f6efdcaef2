#include "config/host_port.h"

#include <charconv>

namespace kproxy::config {

std::string HostPort::to_string() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<HostPort> parse_host_port(std::string_view text, std::string* error, bool allow_port_zero) {
  auto fail = [&](std::string why) -> std::optional<HostPort> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  HostPort out;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return fail("'" + std::string(text) + "': missing ']' after an IPv6 address");
    out.host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') return fail("'" + std::string(text) + "': expected ':port' after ']'");
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail("'" + std::string(text) + "': expected host:port");
    out.host = std::string(text.substr(0, colon));
    if (out.host.find(':') != std::string::npos) return fail("'" + std::string(text) + "': write IPv6 addresses as [addr]:port");
    port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) return fail("'" + std::string(text) + "': empty host");
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535)
    return fail("'" + std::string(text) + "': port must be a number from 1 to 65535");
  if (port == 0 && !allow_port_zero) return fail("'" + std::string(text) + "': port 0 is not allowed here");
  out.port = static_cast<uint16_t>(port);
  return out;
}

std::optional<AdvertiseSpec> parse_advertise(std::string_view text, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<AdvertiseSpec> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  AdvertiseSpec out;
  bool host_given = false;
  size_t at = 0;
  for (;;) {
    size_t comma = text.find(',', at);
    std::string_view item = text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) return fail("'" + std::string(text) + "': an empty item (give a host, or node=host:port items separated by ',')");
    if (size_t eq = item.find('='); eq != std::string_view::npos) {
      std::string_view id_text = item.substr(0, eq);
      int32_t node = 0;
      auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), node);
      if (id_text.empty() || ec != std::errc() || end != id_text.data() + id_text.size() || node < 0)
        return fail("'" + std::string(item) + "': a node id must be a number from 0 to 2147483647");
      std::string why;
      auto address = parse_host_port(item.substr(eq + 1), &why);
      if (!address) return fail("node " + std::to_string(node) + ": " + why);
      if (is_wildcard_host(address->host))
        return fail("node " + std::to_string(node) + ": '" + address->host + "' cannot be handed to clients: name a host they can reach");
      if (!out.nodes.emplace(node, *address).second) return fail("node " + std::to_string(node) + " is given twice");
    } else {
      if (host_given) return fail("'" + std::string(text) + "': more than one host without a node id");
      if (item.find(':') != std::string_view::npos && item.front() != '[' && item.find(':') == item.rfind(':'))
        return fail("'" + std::string(item) + "': a host:port needs a node id (N=host:port); a bare host gives only the host");
      out.host = std::string(item);
      if (is_wildcard_host(out.host)) return fail("'" + out.host + "' cannot be handed to clients: name a host they can reach");
      host_given = true;
    }
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}

bool is_wildcard_host(std::string_view host) { return host.empty() || host == "0.0.0.0" || host == "::" || host == "*"; }

}  // namespace kproxy::config
