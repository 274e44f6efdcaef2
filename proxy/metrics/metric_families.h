// Metric families: the one declaration of every family ProxyMetrics makes itself (its name, type,
// label names and help text) and of the proxy's own events (ProxyEvent).
//
// KPROXY_METRIC_FAMILIES below is the table, in the order a scrape shows the families. It has two
// kinds of row:
//   FAMILY(FamilyId enumerator, name, FamilyType, (label names), help)
//   EVENT(ProxyEvent enumerator, event, help): a counter without labels, kproxy_proxy_<event>_total
// FamilyId, kFamilies, ProxyEvent, kProxyEvents and proxy_event_name() derive from it, and
// ProxyMetrics::collect() (proxy_metrics.cc) makes each family from its row and gives its samples
// label values in the row's order, so no name, help text or label name is written anywhere else
// (but for the label `api` that LabelValues gives the opt-in families itself: a static_assert in
// proxy_metrics.cc checks their rows name it first).
// Adding a family is a row here and its samples in collect(); adding an event is a row here and
// the count(ProxyEvent) where it happens. docs/observability.md names every row (a unit test
// checks it), and dashboards/ query them by name: renaming a row breaks both.
//
// The static_asserts at the end check the table at compile time: names follow Prometheus'
// syntax ([a-z_:][a-z0-9_:]*, lower case here) and are unique, events included; counters end in
// _total and other types do not; label names are [a-z_][a-z0-9_]*, distinct within a family,
// not reserved (__*), and no histogram has a label `le`.
//
// Families that other layers register at run time (ProxyMetrics::labelled_counter,
// export_counter, add_gauge, add_family_reader, add_histogram_reader: the admin server's, the
// tap's, the workers', the transaction tracker's) are declared where they are registered, not here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kproxy::metrics {

// clang-format off
/// Every family ProxyMetrics makes itself, in scrape order (see the top of this file).
#define KPROXY_METRIC_FAMILIES(FAMILY, EVENT)                                                                                        \
  FAMILY(kRequests, "kproxy_requests_total", kCounter, ("listener", "api", "version"),                                               \
         "Requests received from clients, by listener, API and version.")                                                            \
  FAMILY(kResponses, "kproxy_responses_total", kCounter, ("listener", "api", "version"),                                             \
         "Responses sent to clients, by listener, API and version.")                                                                 \
  FAMILY(kConnections, "kproxy_connections", kGauge, ("listener", "side"),                                                           \
         "Connections open now, by listener and side (client or upstream).")                                                         \
  FAMILY(kConnectionsOpened, "kproxy_connections_opened_total", kCounter, ("listener", "side"),                                      \
         "Connections opened, by listener and side.")                                                                                \
  FAMILY(kConnectionsClosed, "kproxy_connections_closed_total", kCounter, ("listener", "reason"),                                    \
         "Client connections closed, by listener and reason.")                                                                       \
  FAMILY(kRequestBytes, "kproxy_request_bytes_total", kCounter, ("api"),                                                             \
         "Bytes of request frames received from clients, by API.")                                                                   \
  FAMILY(kResponseBytes, "kproxy_response_bytes_total", kCounter, ("api"),                                                           \
         "Bytes of response frames sent to clients, by API.")                                                                        \
  FAMILY(kResponseErrors, "kproxy_response_errors_total", kCounter, ("api", "error"),                                                \
         "Non-zero error codes seen in responses, by API and error name.")                                                           \
  FAMILY(kRequestDuration, "kproxy_request_duration_seconds", kHistogram, ("api"),                                                   \
         "Broker round trip as seen by the proxy (request forwarded to response received), by API.")                                 \
  FAMILY(kProxyResidence, "kproxy_proxy_residence_seconds", kHistogram, ("api", "direction"),                                        \
         "Time a frame spends inside kproxy, by API and direction: from the read that completed it to its write "                    \
         "to the other socket (frames a fault rule holds, or that wait behind an earlier response, are not counted).")               \
  FAMILY(kFramesUndecoded, "kproxy_frames_undecoded_total", kCounter, ("api", "reason"),                                             \
         "Frames passed through without decoding their body, by API and reason.")                                                    \
  FAMILY(kDecodeErrors, "kproxy_decode_errors_total", kCounter, ("api", "direction", "reason"),                                      \
         "Frames that did not decode, by API, direction and reason.")                                                                \
  FAMILY(kFramesRewritten, "kproxy_frames_rewritten_total", kCounter, ("api", "stage"),                                              \
         "Frames changed by a pipeline stage, by API and stage.")                                                                    \
  EVENT(kConnectionAccepted, "connections_accepted", "Client connections accepted.")                                                 \
  EVENT(kConnectionRefused, "connections_refused",                                                                                   \
        "Client connections refused over limits.max_connections or while draining.")                                                 \
  EVENT(kAcceptFailure, "accept_failures", "Connections dropped because accept() failed (e.g. too many open files).")                \
  EVENT(kUpstreamConnectFailure, "upstream_connect_failures",                                                                        \
        "Upstream connects that failed or timed out (resolve, TCP or TLS).")                                                         \
  EVENT(kUpstreamDisconnect, "upstream_disconnects", "Brokers that closed while their client was connected.")                        \
  EVENT(kFramingError, "framing_errors", "Frames with a negative or oversized size prefix.")                                         \
  EVENT(kTlsOnPlaintext, "tls_on_plaintext", "TLS ClientHellos received on a plaintext port.")                                       \
  EVENT(kTlsFailure, "tls_failures", "TLS handshakes or records that failed, on either leg (see the log for why).")                  \
  EVENT(kMalformedRequest, "malformed_requests", "Requests whose header or needed fields did not parse.")                            \
  EVENT(kMalformedResponse, "malformed_responses", "Responses that had to be decoded and did not parse.")                            \
  EVENT(kUnexpectedResponse, "unexpected_responses", "Responses with nothing in flight.")                                            \
  EVENT(kCorrelationMismatch, "correlation_mismatches", "Responses whose correlation id did not match the oldest request.")          \
  EVENT(kResponseRewritten, "responses_rewritten", "Responses whose broker addresses were replaced.")                                \
  EVENT(kRequestUnknownVersion, "requests_unknown_version",                                                                          \
        "Requests of an api key or version unknown to kproxy, forwarded untouched.")                                                 \
  EVENT(kRequestWithoutResponse, "requests_without_response", "Produce requests with acks=0.")                                       \
  EVENT(kSaslRawToken, "sasl_raw_tokens", "SaslHandshake v0 raw-token frames passed through.")                                       \
  EVENT(kBrokerPortOpened, "broker_ports_opened", "Broker ports opened (port per broker).")                                          \
  EVENT(kBrokerPortFailure, "broker_port_failures", "Broker ports that could not be opened (no port left, or bind failed).")         \
  EVENT(kLoopClosedUncleanly, "loops_closed_uncleanly", "Worker loops that still had handles when they closed (a kproxy bug).")      \
  EVENT(kSelfConnection, "self_connections", /* proxy/net/self_connection.h */                                                       \
        "Connections refused because kproxy connected to itself, and broker ports not opened because the broker was advertised at "  \
        "kproxy's own address (a broker advertises kproxy's address).")                                                              \
  EVENT(kFrameMemoryRefusal, "frame_memory_refusals",                                                                                \
        "Connections closed because their frame alone is larger than limits.max_buffered_frame_bytes (lowered by a reload); a full " \
        "budget refuses nobody, it pauses reading (kproxy_proxy_reads_paused_total).")                                               \
  EVENT(kConnectionHandedOver, "connections_handed_over", /* proxy/runtime/connection_balancer.h */                                  \
        "Client connections accepted by one worker and served by another with fewer connections.")                                   \
  EVENT(kRequestStreamed, "requests_streamed", /* Pipeline::may_stream_request */                                                    \
        "Large requests forwarded to the broker while they were still arriving (cut-through).")                                      \
  EVENT(kRequestStreamRefused, "requests_stream_refused",                                                                            \
        "Large requests gathered whole instead: their announced size passed limits.max_streamed_request_bytes.")                     \
  EVENT(kWaitDeadline, "wait_deadlines",                                                                                             \
        "Connections closed because a streamed request stalled (limits.request_stall_timeout) or a broker left a half-closed "       \
        "client's requests unanswered (limits.unanswered_request_timeout).")                                                         \
  EVENT(kMemoryTrim, "memory_trims", /* proxy/runtime/memory_return.h */                                                             \
        "Times a worker gave freed memory back to the system (malloc_trim once its last connection closed, or after a burst "        \
        "of opens, TLS handshakes and closes).")                                                                                     \
  EVENT(kProxyHeaderRefused, "proxy_header_refusals", /* proxy/net/proxy_header.h */                                                 \
        "Connections to a proxy_protocol: v2 listener refused: no valid PROXY protocol v2 header (a direct client, version 1, "      \
        "a malformed or oversized header), or none within limits.proxy_header_timeout.")                                             \
  EVENT(kBrokerDiscovery, "broker_discoveries", /* proxy/runtime/broker_discovery.h */                                               \
        "Metadata requests kproxy sent an SNI listener's bootstrap itself, because a connection named a broker no response had "     \
        "named yet (a replica that just started).")                                                                                  \
  EVENT(kBrokerDiscoveryFailure, "broker_discovery_failures",                                                                        \
        "Of those, the ones that learnt no broker (no answer, a refusal, a broker that wants authentication first): the waiting "    \
        "connections were served at the bootstrap.")                                                                                 \
  EVENT(kRequestCompletionDeadline, "request_completion_deadlines",                                                                  \
        "Connections closed because a request frame was not whole within limits.request_completion_timeout of its first byte (a "    \
        "slow or stalled sender).")                                                                                                  \
  EVENT(kFirstRequestDeadline, "first_request_deadlines",                                                                            \
        "Connections closed because they sent no whole request within limits.first_request_timeout of the accept.")                  \
  FAMILY(kInflightRequests, "kproxy_inflight_requests", kGauge, (), "Requests forwarded to a broker and not yet answered.")          \
  FAMILY(kFaultsInjected, "kproxy_faults_injected_total", kCounter, ("rule", "api", "action"),                                       \
         "Faults injected, by rule, API and action.")                                                                                \
  FAMILY(kClients, "kproxy_clients", kGauge, ("software_name", "software_version"),                                                  \
         "Client connections open now by the software they announced in ApiVersions (KIP-511).")                                     \
  FAMILY(kTopicRequests, "kproxy_topic_requests_total", kCounter, ("api", "topic"),                                                  \
         "Requests by API and topic they name (opt-in, capped: see kproxy_label_values_folded_total).")                              \
  FAMILY(kClientRequests, "kproxy_client_requests_total", kCounter, ("api", "client_id"),                                            \
         "Requests by API and client id (opt-in, capped: see kproxy_label_values_folded_total).")                                    \
  FAMILY(kLabelValuesFolded, "kproxy_label_values_folded_total", kCounter, ("label"),                                                \
         "Requests counted under the value \"other\" of an opt-in label because it reached metrics.max_label_values.")
// clang-format on

/// Expands to nothing: a row kind a use of KPROXY_METRIC_FAMILIES skips.
#define KPROXY_METRIC_SKIP(...)

enum class FamilyType : uint8_t { kCounter, kGauge, kHistogram };

/// The most label names a row may have (a histogram's `le` is added on export, not counted).
inline constexpr size_t kMaxLabels = 4;

/// One FAMILY row. `name` is the full exported name; `labels[0..label_count)` are the label names
/// in the order collect() gives values.
struct FamilySpec {
  std::string_view name;
  FamilyType type;
  std::array<std::string_view, kMaxLabels> labels;
  size_t label_count;
  std::string_view help;

  constexpr std::span<const std::string_view> label_names() const { return {labels.data(), label_count}; }
};

/// A family ProxyMetrics makes itself: one per FAMILY row, in table order.
enum class FamilyId : uint8_t {
#define KPROXY_FAMILY_ID(id, name, type, labels, help) id,
  KPROXY_METRIC_FAMILIES(KPROXY_FAMILY_ID, KPROXY_METRIC_SKIP)
#undef KPROXY_FAMILY_ID
};

namespace detail {
template <typename... Names>
constexpr std::array<std::string_view, kMaxLabels> label_array(Names... names) {
  static_assert(sizeof...(Names) <= kMaxLabels, "a family has at most kMaxLabels labels");
  return {std::string_view(names)...};
}
template <typename... Names>
constexpr size_t label_count(Names...) {
  return sizeof...(Names);
}
}  // namespace detail

/// The FAMILY rows, indexed by FamilyId.
inline constexpr FamilySpec kFamilies[] = {
#define KPROXY_FAMILY_SPEC(id, name, type, labels, help) \
  FamilySpec{name, FamilyType::type, detail::label_array labels, detail::label_count labels, help},
    KPROXY_METRIC_FAMILIES(KPROXY_FAMILY_SPEC, KPROXY_METRIC_SKIP)
#undef KPROXY_FAMILY_SPEC
};
inline constexpr size_t kFamilyCount = std::size(kFamilies);

inline constexpr const FamilySpec& family_spec(FamilyId id) { return kFamilies[static_cast<size_t>(id)]; }

// clang-format off
/// Events of the proxy itself, not tied to an API: what it refused, what failed, what it passed
/// through untouched. One per EVENT row (its help text says what counts); each is the counter
/// kproxy_proxy_<event>_total.
enum class ProxyEvent : uint8_t {
#define KPROXY_EVENT_ID(id, event, help) id,
  KPROXY_METRIC_FAMILIES(KPROXY_METRIC_SKIP, KPROXY_EVENT_ID)
#undef KPROXY_EVENT_ID
  kCount,  ///< the number of events (MetricsShard::events), not one
};
// clang-format on

/// One EVENT row: `event` is the <event> of kproxy_proxy_<event>_total.
struct ProxyEventSpec {
  std::string_view event;
  std::string_view help;
};

/// The EVENT rows, indexed by ProxyEvent.
inline constexpr ProxyEventSpec kProxyEvents[] = {
#define KPROXY_EVENT_SPEC(id, event, help) ProxyEventSpec{event, help},
    KPROXY_METRIC_FAMILIES(KPROXY_METRIC_SKIP, KPROXY_EVENT_SPEC)
#undef KPROXY_EVENT_SPEC
};
static_assert(std::size(kProxyEvents) == static_cast<size_t>(ProxyEvent::kCount));

inline constexpr std::string_view kProxyEventPrefix = "kproxy_proxy_";
inline constexpr std::string_view kCounterSuffix = "_total";

/// "framing_errors" for kFramingError ("other" for a value past the table).
const char* proxy_event_name(ProxyEvent event);
/// "kproxy_proxy_framing_errors_total" for kFramingError.
std::string proxy_event_family_name(ProxyEvent event);

// The static checks of the table (see the top of this file).
namespace detail {
constexpr bool lower_name_char(char c, bool first, bool colon) {
  return (c >= 'a' && c <= 'z') || c == '_' || (colon && c == ':') || (!first && c >= '0' && c <= '9');
}
/// [a-z_:][a-z0-9_:]* (colon) or [a-z_][a-z0-9_]* (no colon).
constexpr bool lower_name(std::string_view s, bool colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!lower_name_char(s[i], i == 0, colon)) return false;
  }
  return true;
}
constexpr bool one_line(std::string_view help) { return !help.empty() && help.find('\n') == std::string_view::npos; }
/// Is `name` the exported name of `event` (kproxy_proxy_<event>_total)?
constexpr bool is_event_family(std::string_view name, std::string_view event) {
  return name.size() == kProxyEventPrefix.size() + event.size() + kCounterSuffix.size() && name.starts_with(kProxyEventPrefix) &&
         name.ends_with(kCounterSuffix) && name.substr(kProxyEventPrefix.size(), event.size()) == event;
}

constexpr bool family_ok(const FamilySpec& f) {
  if (!lower_name(f.name, true) || !f.name.starts_with("kproxy_") || !one_line(f.help)) return false;
  if ((f.type == FamilyType::kCounter) != f.name.ends_with(kCounterSuffix)) return false;
  if (f.label_count > kMaxLabels) return false;
  for (size_t i = 0; i < f.label_count; ++i) {
    const std::string_view label = f.labels[i];
    if (!lower_name(label, false) || label.starts_with("__")) return false;
    if (f.type == FamilyType::kHistogram && label == "le") return false;
    for (size_t j = 0; j < i; ++j) {
      if (f.labels[j] == label) return false;
    }
  }
  return true;
}
constexpr bool event_ok(const ProxyEventSpec& e) {
  return lower_name(e.event, false) && !e.event.ends_with(kCounterSuffix) && one_line(e.help);
}
constexpr bool names_unique() {
  for (size_t i = 0; i < kFamilyCount; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (kFamilies[i].name == kFamilies[j].name) return false;
    }
    for (const ProxyEventSpec& e : kProxyEvents) {
      if (is_event_family(kFamilies[i].name, e.event)) return false;
    }
  }
  for (size_t i = 0; i < std::size(kProxyEvents); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (kProxyEvents[i].event == kProxyEvents[j].event) return false;
    }
  }
  return true;
}
}  // namespace detail

#define KPROXY_FAMILY_CHECK(id, name, type, labels, help)                                                                         \
  static_assert(detail::family_ok(family_spec(FamilyId::id)),                                                                     \
                "FAMILY row " name                                                                                                \
                ": name kproxy_[a-z0-9_:]*, _total exactly on counters, label names [a-z_][a-z0-9_]* distinct, not __*, no `le` " \
                "on a histogram, help on one line");
#define KPROXY_EVENT_CHECK(id, event, help)                                          \
  static_assert(detail::event_ok(kProxyEvents[static_cast<size_t>(ProxyEvent::id)]), \
                "EVENT row " event ": [a-z_][a-z0-9_]*, not ending in _total, help on one line");
KPROXY_METRIC_FAMILIES(KPROXY_FAMILY_CHECK, KPROXY_EVENT_CHECK)
#undef KPROXY_FAMILY_CHECK
#undef KPROXY_EVENT_CHECK
static_assert(detail::names_unique(), "every family name is declared once (events included)");

}  // namespace kproxy::metrics
