// ToxicSpec: one toxic as Toxiproxy's HTTP API shows it (docs/toxiproxy.md "Toxics"):
//
//   {"name": "latency_downstream", "type": "latency", "stream": "downstream", "toxicity": 1.0,
//    "attributes": {"latency": 100, "jitter": 0}}
//
// Toxiproxy's facts kept here: `stream` is "upstream" (client → server) or "downstream" (server
// → client, the default); `name` defaults to "<type>_<stream>"; `toxicity` (default 1.0) is the
// chance that a new connection gets the toxic at all (decided once per connection); attributes
// not given are 0, and attributes a type does not know are ignored. kproxy's own types
// (kafka_error, kafka_delay, kafka_drop_response, kafka_close) take Kafka selectors instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kproxy::toxiproxy {

/// An API refusal: Toxiproxy's error body is {"error": message, "status": status}.
struct ApiError {
  int status = 400;
  std::string message;
};

/// Which way the toxic acts: on what the client sends (upstream) or on what comes back (downstream).
enum class Stream { kUpstream, kDownstream };

std::string_view stream_name(Stream stream);

struct ToxicSpec {
  std::string name;
  std::string type;
  Stream stream = Stream::kDownstream;
  double toxicity = 1.0;
  /// Every attribute of the type, defaults filled in (the shape GET shows).
  nlohmann::ordered_json attributes = nlohmann::ordered_json::object();

  /// The toxic as Toxiproxy's API shows it.
  nlohmann::ordered_json to_json() const;
  /// The integer attribute `key` (0 when absent or not an integer).
  int64_t attribute(std::string_view key) const;
};

/// The toxic types kproxy accepts, Toxiproxy's first, then kproxy's Kafka ones.
const std::vector<std::string>& toxic_types();
/// True for kafka_error, kafka_delay, kafka_drop_response, kafka_close.
bool is_kafka_toxic(std::string_view type);

/// "" when `name` (a proxy's or a toxic's) can be addressed as one URL path segment of this API,
/// else why not: empty, a `/`, a control character, `.` or `..` (kproxy's HTTP server refuses
/// such a segment, so a proxy or toxic so named could be created but never read or deleted;
/// docs/toxiproxy-api.openapi.yaml, "Name").
std::string name_refusal(std::string_view name);

/// The kproxy fault rule (docs/faults.md) a Kafka toxic stands for, named `rule_name`:
///   kafka_error          match {api, client_id, transactional_id, topic}, action {error}
///   kafka_delay          action {delay, jitter, side: request (upstream) | response (downstream)}
///   kafka_drop_response  action {drop_response: true}
///   kafka_close          action {close: before}
/// with the toxic's `trigger` (default always; a toxicity below 1 without a trigger becomes
/// {probability: toxicity, seed: a hash of the name}: per request, not per connection as
/// Toxiproxy's toxicity is). Null for a type that is not a Kafka toxic.
nlohmann::json kafka_toxic_rule(const ToxicSpec& toxic, const std::string& rule_name);

/// The kproxy fault rule a Toxiproxy toxic stands for on a Kafka-aware proxy (docs/toxiproxy.md
/// "Toxics on a Kafka-aware proxy"), named `rule_name`, scoped to listener `listener_glob`:
///   latency      delay latency ± jitter (side request for upstream, response for downstream)
///   bandwidth    bandwidth rate × 1000 B/s (direction to_broker / to_client)
///   slicer       slice average_size, slice_delay delay µs / 1000
///   reset_peer   reset_after_bytes 0 (the connection is reset at the next response)
///   timeout      drop_response (nothing comes back; the connection stays open)
///   limit_data   reset_after_bytes bytes
/// A Kafka toxic: kafka_toxic_rule with match.listener added. Null for a toxic with no rule
/// (slow_close; a toxic whose attributes make it do nothing, e.g. latency 0).
nlohmann::json proxy_toxic_rule(const ToxicSpec& toxic, const std::string& rule_name, const std::string& listener_glob);

/// Reads a POST /proxies/{proxy}/toxics body. nullopt with `error` set when refused (400: bad
/// body, unknown stream or type, bad attribute; a Kafka toxic whose fault rule kproxy's rule
/// parser refuses, e.g. an unknown API or error name).
std::optional<ToxicSpec> parse_toxic(std::string_view body, ApiError& error);

/// Applies a PATCH (or POST) /proxies/{proxy}/toxics/{toxic} body to `toxic`: `attributes` and
/// `toxicity` may change, the rest stays. False with `error` set (toxic unchanged) when refused.
bool update_toxic(ToxicSpec& toxic, std::string_view body, ApiError& error);

}  // namespace kproxy::toxiproxy
