#include "proxy/connection/connection_preamble.h"

#include <algorithm>
#include <utility>

namespace kproxy::connection {

namespace {

ConnectionPreamble::Phase first_phase(const ConnectionPreamble::Setup& setup) {
  if (setup.proxy_protocol) return ConnectionPreamble::AwaitingProxyHeader{net::ProxyHeaderReader()};
  if (setup.sni && setup.tls) return ConnectionPreamble::AwaitingClientHello(setup.sni->max_client_hello_bytes);
  return ConnectionPreamble::Routed{};
}

}  // namespace

ConnectionPreamble::ConnectionPreamble(const Setup& setup) : setup_(setup), phase_(first_phase(setup)) {}

std::string_view ConnectionPreamble::phase_name() const {
  static constexpr std::string_view kNames[] = {"awaiting_proxy_header", "awaiting_client_hello", "awaiting_brokers", "routed"};
  static_assert(std::variant_size_v<Phase> == std::size(kNames), "one name per phase");
  return kNames[phase_.index()];
}

ConnectionPreamble::time_point ConnectionPreamble::deadline() const {
  // Both deadlines run from the accept: a PROXY header does not buy its client more time for the
  // ClientHello that follows it.
  if (std::holds_alternative<AwaitingProxyHeader>(phase_)) return setup_.opened_at + setup_.proxy_header_timeout;
  if (std::holds_alternative<AwaitingClientHello>(phase_)) return setup_.opened_at + setup_.sni->client_hello_timeout;
  return time_point::max();
}

PreambleStep ConnectionPreamble::feed(codec::Bytes data) {
  if (auto* p = std::get_if<AwaitingProxyHeader>(&phase_)) {
    switch (p->reader.feed(data)) {
      case net::ProxyHeaderReader::State::kNeedMore: return {};
      case net::ProxyHeaderReader::State::kRefused: {
        PreambleStep step;
        step.kind = PreambleStep::Kind::kRefuse;
        step.proxy_header_refused = true;
        step.reason = {net::CloseCategory::kClientProtocolError, "PROXY protocol: " + p->reader.reason()};
        phase_ = Routed{};
        return step;
      }
      case net::ProxyHeaderReader::State::kDone: break;
    }
    codec::Bytes rest = p->reader.rest();
    std::vector<uint8_t> after(rest.begin(), rest.end());  // the reader goes with its phase
    net::ProxyHeader header = p->reader.header();
    return after_proxy_header(after, std::move(header));
  }
  if (auto* h = std::get_if<AwaitingClientHello>(&phase_)) {
    size_t held_before = h->reader.bytes().size();
    if (h->reader.feed(data) == tls::ClientHelloReader::State::kNeedMore) return {};
    // What the reader did not keep (past its cap, in the read that finished the hello) follows it.
    size_t taken = h->reader.bytes().size() - held_before;
    std::vector<uint8_t> received = h->reader.bytes();
    received.insert(received.end(), data.begin() + static_cast<std::ptrdiff_t>(std::min(taken, data.size())), data.end());
    return route_by_client_hello(std::move(received));
  }
  // Routed or waiting for brokers: the connection reads no bytes into the preamble then.
  PreambleStep step;
  step.kind = PreambleStep::Kind::kForward;
  step.bytes.assign(data.begin(), data.end());
  return step;
}

PreambleStep ConnectionPreamble::after_proxy_header(codec::Bytes rest, net::ProxyHeader header) {
  PreambleStep step;
  if (setup_.sni && !setup_.tls) {
    // TLS ended at the load balancer: the name its client asked for comes in the header
    // (PP2_TYPE_AUTHORITY, config/README.md "SNI listeners").
    tls::ClientHelloInfo asked{header.authority.value_or(""), header.authority.has_value(), std::nullopt};
    step.kind = PreambleStep::Kind::kRoute;
    step.route = route_by_name(*setup_.sni, header.authority ? tls::normalize_server_name(*header.authority) : std::nullopt);
    step.name = "PROXY authority " + shown_server_name(asked);
    step.bytes.assign(rest.begin(), rest.end());
    step.proxy_header = std::move(header);
    phase_ = Routed{};
    return step;
  }
  if (setup_.sni) {
    // The ClientHello follows the header, within the same read or later.
    phase_ = AwaitingClientHello(setup_.sni->max_client_hello_bytes);
    step = rest.empty() ? PreambleStep{} : feed(rest);
    step.proxy_header = std::move(header);
    return step;
  }
  step.kind = PreambleStep::Kind::kForward;
  step.bytes.assign(rest.begin(), rest.end());
  step.proxy_header = std::move(header);
  phase_ = Routed{};
  return step;
}

PreambleStep ConnectionPreamble::route_by_client_hello(std::vector<uint8_t> received) {
  auto& h = std::get<AwaitingClientHello>(phase_);
  PreambleStep step;
  step.kind = PreambleStep::Kind::kRoute;
  // "SNI 'kafka.example.org'", "SNI no server name", or for a hello never read whole "SNI: ClientHello".
  const bool read = h.reader.state() == tls::ClientHelloReader::State::kDone;
  step.name = read ? "SNI " + shown_server_name(h.reader.hello()) : "SNI: ClientHello";
  step.route = route_by_server_name(*setup_.sni, h.reader);
  step.error = h.reader.error();
  step.bytes = std::move(received);
  phase_ = Routed{};
  return step;
}

PreambleStep ConnectionPreamble::on_deadline() {
  if (std::holds_alternative<AwaitingProxyHeader>(phase_)) {
    PreambleStep step;
    step.kind = PreambleStep::Kind::kRefuse;
    step.proxy_header_refused = true;  // a header not in time is a refused header (config/README.md)
    step.reason = {
        net::CloseCategory::kClientProtocolError,
        "no PROXY protocol header within " + std::to_string(setup_.proxy_header_timeout.count()) + " ms (limits.proxy_header_timeout)"};
    phase_ = Routed{};
    return step;
  }
  if (std::holds_alternative<AwaitingClientHello>(phase_)) return route_by_client_hello({});  // never whole: kTimeout
  return {};
}

void ConnectionPreamble::await_brokers(PreambleStep step) {
  asked_brokers_ = true;
  phase_ = AwaitingBrokers{step.route, std::move(step.name), std::move(step.error), std::move(step.bytes)};
}

PreambleStep ConnectionPreamble::brokers_discovered() {
  auto* w = std::get_if<AwaitingBrokers>(&phase_);
  if (!w) return {};
  PreambleStep step;
  step.kind = PreambleStep::Kind::kRoute;
  step.route = w->route;
  step.name = std::move(w->name);
  step.error = std::move(w->error);
  step.bytes = std::move(w->held);
  phase_ = Routed{};
  return step;
}

}  // namespace kproxy::connection
