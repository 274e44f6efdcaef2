// Tap events: one JSON object per frame, built only when a tap subscriber wants the frame.
//
//   {"ts":"2026-11-29T13:30:00.123456Z","connection":7,"client_id":"app","direction":"request",
//    "api":"Produce","api_key":0,"version":11,"correlation_id":42,
//    "client_software":{"name":"apache-kafka-java","version":"4.4.0"},
//    "body":{...every field by Kafka's name...}}
//   responses add "latency_ms" (broker round trip) and "synthetic" when kproxy answered itself.
//
// Records are summarised as {"bytes":N,"batches":B,"records":R}; their contents (record_contents.h)
// only when the config turns tap.records on (TapLimits::records). SASL payloads (AuthBytes) and
// other secrets (delegation token HMACs, SCRAM salts and salted passwords) are always replaced by
// "<redacted N bytes>", whatever the settings. A body that does not decode gives
// "decode_error" instead of "body".
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "codec/message.h"
#include "proxy/stage/frame_observer.h"
#include "proxy/tap/tap_hub.h"

namespace kproxy::tap {

/// Now as the tap's lines show it: UTC, ISO 8601 with microseconds ("2026-12-04T01:02:03.000004Z").
std::string timestamp_now();

std::string request_line(const stage::RequestContext& ctx, const TapLimits& limits);
std::string response_line(const stage::ResponseContext& ctx, std::chrono::nanoseconds latency, std::string_view client_id,
                          const TapLimits& limits);

/// Batch and record counts of a record set (v2 batches; older message sets count one per message).
struct RecordSummary {
  size_t bytes = 0, batches = 0, records = 0;
};
RecordSummary summarise_records(codec::Bytes records);

/// Replaces secret fields anywhere in a body's JSON (by Kafka field name) with "<redacted>".
void redact_secrets(nlohmann::json& body);

}  // namespace kproxy::tap
