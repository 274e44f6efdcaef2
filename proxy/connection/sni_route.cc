#include "proxy/connection/sni_route.h"

#include "proxy/metrics/proxy_metrics.h"

namespace kproxy::connection {

namespace {

std::vector<std::string> outcome_names() {
  std::vector<std::string> outcomes;
  for (size_t i = 0; i < static_cast<size_t>(SniOutcome::kCount); ++i) outcomes.push_back(sni_outcome_name(static_cast<SniOutcome>(i)));
  return outcomes;
}

}  // namespace

metrics::LabelledCounter& sni_outcome_counter(metrics::ProxyMetrics& metrics) {
  return metrics.labelled_counter(
      "kproxy_proxy_sni_connections_total",
      "Connections to SNI listeners by what their ClientHello's server name decided (config/README.md \"SNI listeners\"): "
      "bootstrap, broker, unknown_node (served as bootstrap), unknown_name_refused, unknown_name_bootstrap, no_name_refused, "
      "no_name_bootstrap, not_tls, too_large, malformed, timeout.",
      "outcome", outcome_names());
}

const char* sni_outcome_name(SniOutcome outcome) {
  switch (outcome) {
    case SniOutcome::kBootstrap: return "bootstrap";
    case SniOutcome::kBroker: return "broker";
    case SniOutcome::kUnknownNode: return "unknown_node";
    case SniOutcome::kUnknownNameRefused: return "unknown_name_refused";
    case SniOutcome::kUnknownNameBootstrap: return "unknown_name_bootstrap";
    case SniOutcome::kNoNameRefused: return "no_name_refused";
    case SniOutcome::kNoNameBootstrap: return "no_name_bootstrap";
    case SniOutcome::kNotTls: return "not_tls";
    case SniOutcome::kTooLarge: return "too_large";
    case SniOutcome::kMalformed: return "malformed";
    case SniOutcome::kTimeout: return "timeout";
    case SniOutcome::kCount: break;
  }
  return "?";
}

bool SniRoute::refuse() const { return outcome == SniOutcome::kUnknownNameRefused || outcome == SniOutcome::kNoNameRefused; }

bool SniRoute::serve() const {
  switch (outcome) {
    case SniOutcome::kBootstrap:
    case SniOutcome::kBroker:
    case SniOutcome::kUnknownNode:
    case SniOutcome::kUnknownNameBootstrap:
    case SniOutcome::kNoNameBootstrap: return true;
    default: return false;
  }
}

SniRoute route_by_server_name(const config::SniConfig& sni, const tls::ClientHelloReader& reader) {
  using State = tls::ClientHelloReader::State;
  switch (reader.state()) {
    case State::kNotTls: return {SniOutcome::kNotTls};
    case State::kTooLarge: return {SniOutcome::kTooLarge};
    case State::kMalformed: return {SniOutcome::kMalformed};
    case State::kNeedMore: return {SniOutcome::kTimeout};
    case State::kDone: break;
  }
  return route_by_name(sni, reader.server_name());  // normalised: lower case, no trailing dot
}

SniRoute route_by_name(const config::SniConfig& sni, const std::optional<std::string>& name) {
  const bool refuse = sni.unknown == config::UnknownServerName::kRefuse;
  // An address literal is no host name (RFC 6066 section 3): as if none was sent.
  if (!name || tls::is_ip_literal(*name)) return {refuse ? SniOutcome::kNoNameRefused : SniOutcome::kNoNameBootstrap};
  if (*name == sni.bootstrap) return {SniOutcome::kBootstrap};
  if (auto node = sni.broker.match(*name)) return {SniOutcome::kBroker, *node};
  return {refuse ? SniOutcome::kUnknownNameRefused : SniOutcome::kUnknownNameBootstrap};
}

std::string shown_server_name(const tls::ClientHelloInfo& hello) {
  if (!hello.has_server_name) return "no server name";
  std::string out = "'";
  for (char c : std::string_view(hello.raw_server_name).substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  out += hello.raw_server_name.size() > 64 ? "...'" : "'";
  return out;
}

std::string configured_names(const config::SniConfig& sni) {
  return "bootstrap '" + sni.bootstrap + "', brokers '" + sni.broker.text() + "'";
}

}  // namespace kproxy::connection
