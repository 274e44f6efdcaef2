#include "proxy/tap/tap_event.h"

#include <array>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages/fetch.h"
#include "codec/generated/messages/produce.h"
#include "proxy/tap/record_contents.h"

namespace kproxy::tap {
namespace {

uint32_t be32(const uint8_t* p) { return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]}; }

nlohmann::json summary_json(const std::optional<codec::Bytes>& records, const TapLimits& limits) {
  if (!records) return nullptr;
  if (limits.records) return record_contents(*records, RecordContentLimits{limits.max_record_bytes, limits.max_records});
  RecordSummary s = summarise_records(*records);
  return {{"bytes", s.bytes}, {"batches", s.batches}, {"records", s.records}};
}

/// Replaces the {"bytes": N} records placeholders of Produce requests and Fetch responses with
/// batch and record counts, or with the records themselves when tap.records is on.
void summarise_record_fields(const codec::Message& message, nlohmann::json& body, const TapLimits& limits) {
  try {
    if (message.api_key() == static_cast<int16_t>(codec::ApiKey::kProduce) && message.is_request()) {
      const auto& produce = static_cast<const codec::ProduceRequest&>(message);
      auto& topics = body.at("TopicData");
      for (size_t t = 0; t < produce.topic_data.size() && t < topics.size(); ++t) {
        auto& parts = topics[t].at("PartitionData");
        for (size_t p = 0; p < produce.topic_data[t].partition_data.size() && p < parts.size(); ++p) {
          parts[p]["Records"] = summary_json(produce.topic_data[t].partition_data[p].records, limits);
        }
      }
    } else if (message.api_key() == static_cast<int16_t>(codec::ApiKey::kFetch) && !message.is_request()) {
      const auto& fetch = static_cast<const codec::FetchResponse&>(message);
      auto& topics = body.at("Responses");
      for (size_t t = 0; t < fetch.responses.size() && t < topics.size(); ++t) {
        auto& parts = topics[t].at("Partitions");
        for (size_t p = 0; p < fetch.responses[t].partitions.size() && p < parts.size(); ++p) {
          parts[p]["Records"] = summary_json(fetch.responses[t].partitions[p].records, limits);
        }
      }
    }
  } catch (const nlohmann::json::exception&) {
    // Field layout not as expected at this version: keep the byte counts to_json gave.
  }
}

nlohmann::json header_fields(int64_t connection, std::string_view client_id, bool response, int16_t api_key, int16_t version,
                             int32_t correlation_id, const stage::ConnectionInfo& info) {
  const char* name = codec::api_name(api_key);
  nlohmann::json j = {{"ts", timestamp_now()},
                      {"connection", connection},
                      {"client_id", std::string(client_id)},
                      {"direction", response ? "response" : "request"},
                      {"api", name ? name : "unknown"},
                      {"api_key", api_key},
                      {"version", version},
                      {"correlation_id", correlation_id}};
  // The client's address: the one a PROXY header named when a load balancer is in front.
  if (!info.client_address.empty()) j["client_address"] = info.client_address;
  if (!info.client_software_name().empty()) {
    j["client_software"] = {{"name", info.client_software->name}, {"version", info.client_software->version}};
  }
  return j;
}

void add_body(nlohmann::json& j, const std::shared_ptr<codec::Message>& message, int16_t version, const std::string& error,
              const TapLimits& limits) {
  if (!message) {
    j["decode_error"] = error.empty() ? "not decoded" : error;
    return;
  }
  nlohmann::json body;
  message->to_json(body, version);
  summarise_record_fields(*message, body, limits);
  redact_secrets(body);
  j["body"] = std::move(body);
}

}  // namespace

std::string timestamp_now() {
  auto now = std::chrono::system_clock::now();
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(micros / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, static_cast<long>(micros % 1000000));
  return buf;
}

RecordSummary summarise_records(codec::Bytes records) {
  RecordSummary s;
  s.bytes = records.size();
  size_t pos = 0;
  // Batch layout: baseOffset int64, length int32 (bytes after this field), then v2: partition
  // leader epoch int32, magic int8 (offset 16), ..., record count int32 at offset 57.
  while (pos + 12 <= records.size()) {
    size_t length = be32(records.data() + pos + 8);
    size_t total = 12 + length;
    if (pos + total > records.size()) break;  // a fetch may end with a partial batch
    ++s.batches;
    uint8_t magic = pos + 16 < records.size() ? records[pos + 16] : 0;
    if (magic >= 2 && pos + 61 <= records.size()) s.records += be32(records.data() + pos + 57);
    else s.records += 1;
    pos += total;
  }
  return s;
}

void redact_secrets(nlohmann::json& body) {
  static const std::array<std::string_view, 5> kSecret = {"AuthBytes", "Hmac", "SaltedPassword", "Salt", "Password"};
  if (body.is_object()) {
    for (auto it = body.begin(); it != body.end(); ++it) {
      bool secret = false;
      for (auto k : kSecret) secret = secret || it.key() == k;
      if (secret) {
        size_t approx = it.value().is_string() ? it.value().get_ref<const std::string&>().size() * 3 / 4 : 0;
        it.value() = "<redacted " + std::to_string(approx) + " bytes>";
      } else {
        redact_secrets(it.value());
      }
    }
  } else if (body.is_array()) {
    for (auto& v : body) redact_secrets(v);
  }
}

std::string request_line(const stage::RequestContext& ctx, const TapLimits& limits) {
  const auto& h = ctx.header();
  std::string_view client_id = h.client_id ? *h.client_id : std::string_view();
  nlohmann::json j = header_fields(static_cast<int64_t>(ctx.connection().id), client_id, false, h.api_key, h.api_version, h.correlation_id,
                                   ctx.connection());
  add_body(j, ctx.message(), h.api_version, ctx.decode_error(), limits);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string response_line(const stage::ResponseContext& ctx, std::chrono::nanoseconds latency, std::string_view client_id,
                          const TapLimits& limits) {
  codec::Bytes frame = ctx.frame();
  int32_t correlation_id = frame.size() >= 8 ? static_cast<int32_t>(be32(frame.data() + 4)) : -1;
  nlohmann::json j = header_fields(static_cast<int64_t>(ctx.connection().id), client_id, true, ctx.api_key(), ctx.api_version(),
                                   correlation_id, ctx.connection());
  j["latency_ms"] = std::chrono::duration<double, std::milli>(latency).count();
  if (ctx.synthetic()) j["synthetic"] = true;
  add_body(j, ctx.message(), ctx.body_version() >= 0 ? ctx.body_version() : ctx.api_version(), ctx.decode_error(), limits);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kproxy::tap
