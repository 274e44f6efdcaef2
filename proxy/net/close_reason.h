// CloseReason: why kproxy closed a client connection, as a category (which names the metric
// label) and a detail (which goes to the log only).
//
// The label comes from the category and never from the text: a detail can say anything a peer
// or a rule supplies without moving the connection to another bucket of
// kproxy_connections_closed_total.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kproxy::net {

enum class CloseCategory : uint8_t {
  kClientClosed,           ///< the client closed or reset its socket, or a read/write on it failed
  kBrokerClosed,           ///< the broker closed its connection (responses received are delivered first)
  kUpstreamConnectFailed,  ///< resolving, connecting or the TLS handshake to the broker failed
  kClientProtocolError,    ///< bad framing or a request kproxy must parse and cannot
  kBrokerProtocolError,    ///< bad framing, an unexpected response, a correlation id mismatch
  kTls,                    ///< the client's TLS handshake or a TLS record failed
  kLimit,                  ///< a configured limit: handshake timeout, drain deadline, no broker port
  kFault,                  ///< a fault rule closed or reset the connection on purpose
  kShutdown,               ///< kproxy is draining: every in-flight request was answered first
  kSelfConnection,         ///< the upstream is kproxy itself (a broker advertises kproxy's own address)
  kUnanswered,             ///< the client closed its side and the broker left its requests unanswered (limits.unanswered_request_timeout)
  kRequestTimeout,         ///< a request frame not whole within limits.request_completion_timeout of its first byte
  kFirstRequestTimeout,    ///< no whole request within limits.first_request_timeout of the accept
  kOther,
};

inline constexpr size_t kCloseCategories = static_cast<size_t>(CloseCategory::kOther) + 1;

/// The metric label of `category` ("client_closed", "broker_closed", ...).
std::string_view close_label(CloseCategory category);

struct CloseReason {
  CloseCategory category = CloseCategory::kOther;
  std::string detail;  ///< for the log: what happened, with the peer and numbers that explain it
};

}  // namespace kproxy::net
