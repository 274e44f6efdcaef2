#include "proxy/connection/connection_state.h"

namespace kproxy::connection {

std::string_view state_name(ConnectionState state) {
  switch (state) {
    case ConnectionState::kPreamble: return "preamble";
    case ConnectionState::kConnecting: return "connecting";
    case ConnectionState::kForwarding: return "forwarding";
    case ConnectionState::kDraining: return "draining";
    case ConnectionState::kClosing: return "closing";
    case ConnectionState::kClosed: return "closed";
  }
  return "unknown";
}

}  // namespace kproxy::connection
