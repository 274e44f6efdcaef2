// ConnectionPreamble: what a connection reads from its client before it knows where the client
// goes. It turns the first bytes into a route, and owns, phase by phase, only what that phase
// needs: its reader, its deadline and the bytes it holds.
//
//   awaiting PROXY header ──header read──► awaiting ClientHello ──hello read──► routed
//          │  (listeners[].proxy_protocol)      │  (an SNI listener with TLS)     ▲
//          │                                    └──names a broker no response named yet──┐
//          │                                                                            ▼
//          ├──header read, no SNI listener──► forward (the rest goes to the frame reader)
//          ├──header read, SNI without TLS──► routed by the header's authority TLV
//          └──refused / not in time──► refuse (the connection closes)      awaiting brokers
//                                                                        (held until the
//                                                                         worker's discovery)
//
// The component reads bytes and time and returns a PreambleStep; it opens no socket, arms no
// timer and logs nothing, so every path is a unit test (tests/unit/proxy/connection/
// connection_preamble_test.cc). ClientConnection carries the step out: it arms one timer at
// deadline(), logs, counts, installs TLS, connects the upstream and replays the held bytes
// (docs/architecture.md "The connection's states").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "codec/reader.h"
#include "config/sni_config.h"
#include "proxy/connection/sni_route.h"
#include "proxy/net/close_reason.h"
#include "proxy/net/proxy_header.h"
#include "proxy/tls/client_hello.h"

namespace kproxy::connection {

/// What the connection does after the preamble took bytes (or its deadline passed).
struct PreambleStep {
  enum class Kind : uint8_t {
    kNeedMore,  ///< keep reading; the deadline may have moved to the next phase's
    kForward,   ///< done, no routing: `bytes` are the client's first request bytes
    kRoute,     ///< an SNI decision: `route` with what the client asked for, `bytes` replayed once served
    kRefuse,    ///< close with `reason` (a refused or late PROXY header)
  };
  Kind kind = Kind::kNeedMore;
  std::vector<uint8_t> bytes;
  SniRoute route;
  std::string name;   ///< kRoute: "SNI 'kafka.example.org'", "PROXY authority ...", "SNI: ClientHello"
  std::string error;  ///< kRoute: why the ClientHello could not be read, if it could not
  net::CloseReason reason;
  /// kRefuse because the PROXY header was refused or late: kproxy_proxy_proxy_header_refusals_total
  /// (and the warning a load balancer's operator looks for) rather than a generic close.
  bool proxy_header_refused = false;
  /// The PROXY header, once read: the client it names (empty: a LOCAL header or no address) and
  /// the authority TLV, for the connection's logs and its peer address.
  std::optional<net::ProxyHeader> proxy_header;
};

class ConnectionPreamble {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// What the listener asks of a new connection.
  struct Setup {
    bool proxy_protocol = false;  ///< listeners[].proxy_protocol: a PROXY v2 header comes first
    /// listeners[].sni (null: none). With `tls`, the ClientHello routes; without, the PROXY
    /// header's authority TLV does (TLS ended at the load balancer).
    const config::SniConfig* sni = nullptr;
    bool tls = false;
    time_point opened_at;
    std::chrono::milliseconds proxy_header_timeout{3000};  ///< limits.proxy_header_timeout
  };

  /// The phases, each with only its own data.
  struct AwaitingProxyHeader {
    net::ProxyHeaderReader reader;
  };
  struct AwaitingClientHello {
    tls::ClientHelloReader reader;
    explicit AwaitingClientHello(size_t max_bytes) : reader(max_bytes) {}
  };
  struct AwaitingBrokers {
    SniRoute route;
    std::string name, error;
    std::vector<uint8_t> held;  ///< every client byte so far, replayed once routed
  };
  struct Routed {};
  using Phase = std::variant<AwaitingProxyHeader, AwaitingClientHello, AwaitingBrokers, Routed>;

  /// True when a listener with this setup reads a preamble at all.
  static bool needed(const Setup& setup) { return setup.proxy_protocol || setup.sni != nullptr; }

  explicit ConnectionPreamble(const Setup& setup);

  /// Takes the client's next bytes.
  PreambleStep feed(codec::Bytes data);
  /// When the current phase gives up (time_point::max(): no deadline of its own).
  time_point deadline() const;
  /// The deadline passed: a late PROXY header is refused; a late ClientHello is the SNI timeout
  /// route (sni_route.h kTimeout). Any other phase: kNeedMore.
  PreambleStep on_deadline();
  /// Routing `step` (a kRoute) waits for the worker's broker discovery: holds its route and bytes.
  /// Once only per connection (asked_brokers()); afterwards an unknown node is served as the bootstrap.
  void await_brokers(PreambleStep step);
  /// The discovery finished: the held route again (kRoute), to be decided with what was learnt.
  PreambleStep brokers_discovered();
  bool asked_brokers() const { return asked_brokers_; }
  /// Whether bytes still go to the preamble (not routed, not waiting for brokers).
  bool reading() const {
    return std::holds_alternative<AwaitingProxyHeader>(phase_) || std::holds_alternative<AwaitingClientHello>(phase_);
  }
  const Phase& phase() const { return phase_; }
  /// "awaiting_proxy_header", "awaiting_client_hello", "awaiting_brokers", "routed".
  std::string_view phase_name() const;

 private:
  PreambleStep after_proxy_header(codec::Bytes rest, net::ProxyHeader header);
  PreambleStep route_by_client_hello(std::vector<uint8_t> received);

  Setup setup_;
  Phase phase_;
  bool asked_brokers_ = false;
};

}  // namespace kproxy::connection
