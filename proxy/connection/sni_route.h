// SniRoute: where an SNI listener (config/sni_config.h) sends a connection, decided from what the
// client's ClientHello said (proxy/tls/client_hello.h), before any TLS handshake byte is answered.
//
//   bootstrap name                  ─► the bootstrap servers (outcome bootstrap)
//   a name of the broker pattern    ─► that node's real address (broker), or the bootstrap when
//                                      no response named the node yet (unknown_node: a client
//                                      with metadata older than kproxy; the broker's NOT_LEADER /
//                                      NOT_COORDINATOR answers send it to refresh)
//   another name / no name          ─► sni.unknown: refused with the TLS alert unrecognized_name
//                                      (RFC 6066 section 3) or served as the bootstrap
//   not TLS, too large, malformed, not whole within sni.client_hello_timeout ─► closed
//
// Every decision is counted in kproxy_proxy_sni_connections_total{outcome}; the ones that are not
// a known name are logged by the connection with the name received and the configured names
// (config/README.md "SNI listeners").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/sni_config.h"
#include "proxy/metrics/labelled_counter.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/tls/client_hello.h"

namespace kproxy::connection {

/// The `outcome` label of kproxy_proxy_sni_connections_total.
enum class SniOutcome : uint8_t {
  kBootstrap = 0,         ///< the bootstrap name
  kBroker,                ///< a broker's name, node known
  kUnknownNode,           ///< a broker's name whose node no response named yet: served as bootstrap
  kUnknownNameRefused,    ///< a name of neither kind, sni.unknown: refuse
  kUnknownNameBootstrap,  ///< a name of neither kind, sni.unknown: bootstrap
  kNoNameRefused,         ///< no server name (e.g. a client connecting by IP address), refused
  kNoNameBootstrap,       ///< no server name, served as bootstrap
  kNotTls,                ///< the first bytes are not a TLS handshake
  kTooLarge,              ///< more than sni.max_client_hello_bytes before the ClientHello was whole
  kMalformed,             ///< not a ClientHello kproxy can read
  kTimeout,               ///< not whole within sni.client_hello_timeout
  kCount,
};

/// "bootstrap", "broker", "unknown_node", "unknown_name_refused", ...
const char* sni_outcome_name(SniOutcome outcome);
/// kproxy_proxy_sni_connections_total{outcome} in `metrics` (made on first use, every series at 0).
metrics::LabelledCounter& sni_outcome_counter(metrics::ProxyMetrics& metrics);

/// What the ClientHello asks for, by name alone (the node's address is the connection's to find).
struct SniRoute {
  SniOutcome outcome = SniOutcome::kMalformed;
  int32_t node_id = -1;  ///< outcome kBroker: the node the name stands for
  bool refuse() const;   ///< refused (alert, close), not served
  bool serve() const;    ///< served: bootstrap, broker or a policy's bootstrap
};

/// The route of a reader whose state is kDone, kNotTls, kTooLarge or kMalformed.
SniRoute route_by_server_name(const config::SniConfig& sni, const tls::ClientHelloReader& reader);
/// The route of a name already normalised (tls::normalize_server_name; nullopt: none or not a
/// host name): the SNI's, or a PROXY v2 header's authority TLV when TLS ended at the load
/// balancer (PP2_TYPE_AUTHORITY, config/README.md "SNI listeners").
SniRoute route_by_name(const config::SniConfig& sni, const std::optional<std::string>& name);

/// The name the client sent as a log shows it: quoted, at most 64 characters, non-printable as
/// '?', or "no server name".
std::string shown_server_name(const tls::ClientHelloInfo& hello);

/// "bootstrap 'kafka.example.com', brokers 'broker-$(nodeId).kafka.example.com'": what an
/// operator compares the received name with.
std::string configured_names(const config::SniConfig& sni);

/// The TLS alert record unrecognized_name (112), fatal, as sent before any handshake (RFC 8446
/// section 6, RFC 6066 section 3): a client sees why instead of a reset.
inline constexpr uint8_t kUnrecognizedNameAlert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70};

}  // namespace kproxy::connection
