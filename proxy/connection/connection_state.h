// ConnectionState: where a client connection is in its life, and the only transitions it may make.
// ClientConnection keeps one std::variant of states in this order, each owning only its own data
// (proxy/connection/client_connection.h); this enum names the variant's index.
//
//   preamble ──routed──► connecting ──upstream connected──► forwarding ──drain()──► draining
//      │  └──(upstream up already)───────────────────────────────┘ │                   │
//      │           │  └────────────────────drain()─────────────────┼──────────────────►│
//      └───────────┴──────────────┬────────────────────────────────┴───────────────────┘
//                                 ▼ close() / finish()
//                              closing ──every handle closed──► closed (the object is deleted)
//
// preamble: a PROXY header, a ClientHello or the broker discovery decides where the client goes
// (proxy/connection/connection_preamble.h); only listeners with proxy_protocol or sni have one.
// connecting: the client is read (requests wait for the broker); forwarding: both sides open;
// draining: no new requests, closes once every request was answered (kproxy is shutting down, or
// the client half-closed); closing: sockets closing, nothing is sent or read; closed: libuv is
// done with every handle.
#pragma once

#include <cstdint>
#include <string_view>

namespace kproxy::connection {

enum class ConnectionState : uint8_t { kPreamble, kConnecting, kForwarding, kDraining, kClosing, kClosed };

/// True when a connection in `from` may move to `to`.
constexpr bool can_transition(ConnectionState from, ConnectionState to) {
  using S = ConnectionState;
  switch (from) {
    case S::kPreamble: return to == S::kConnecting || to == S::kForwarding || to == S::kDraining || to == S::kClosing;
    case S::kConnecting: return to == S::kForwarding || to == S::kDraining || to == S::kClosing;
    case S::kForwarding: return to == S::kDraining || to == S::kClosing;
    case S::kDraining: return to == S::kClosing;
    case S::kClosing: return to == S::kClosed;
    case S::kClosed: return false;
  }
  return false;
}

std::string_view state_name(ConnectionState state);

}  // namespace kproxy::connection
