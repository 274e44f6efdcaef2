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

bool is_wildcard_host(std::string_view host) { return host.empty() || host == "0.0.0.0" || host == "::" || host == "*"; }

}  // namespace kproxy::config
