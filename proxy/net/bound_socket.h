// bind_tcp_socket: a TCP socket bound to host:port before any event loop sees it, so that the
// port is known (port 0: the kernel picks a free one, issue #30 item 7) before kproxy hands it
// to clients. Every worker then listens on a duplicate (proxy/runtime/listener.h open_shared).
#pragma once

#include <cstdint>
#include <string>

#include "proxy/net/owned_descriptor.h"

namespace kproxy::net {

/// A bound, not yet listening, TCP socket; or why there is none.
struct BoundSocket {
  OwnedDescriptor socket;  ///< close-on-exec, non-blocking, SO_REUSEADDR (as libuv binds)
  uint16_t port = 0;       ///< the port bound (the kernel's pick when 0 was asked for)
  std::string error;       ///< "" on success, else "cannot listen on HOST:PORT: REASON"
};

/// Binds a TCP socket to `host` (an IPv4 or IPv6 literal) and `port`.
BoundSocket bind_tcp_socket(const std::string& host, uint16_t port);

/// The local port of socket `fd`, 0 if it has none.
uint16_t local_port(int fd);

}  // namespace kproxy::net
