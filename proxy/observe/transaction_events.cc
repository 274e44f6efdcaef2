#include "proxy/observe/transaction_events.h"

#include <array>
#include <utility>

#include <nlohmann/json.hpp>

#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/generated/error_code.h"
#include "codec/generated/messages/add_offsets_to_txn.h"
#include "codec/generated/messages/add_partitions_to_txn.h"
#include "codec/generated/messages/end_txn.h"
#include "codec/generated/messages/init_producer_id.h"
#include "codec/generated/messages/txn_offset_commit.h"
#include "codec/message_support.h"
#include "codec/reader.h"
#include "proxy/observe/transactional_produce.h"
#include "proxy/tap/tap_event.h"

namespace kproxy::observe {

namespace {

void fill_client(TxnRequest& r, const stage::RequestContext& ctx) {
  r.api_version = ctx.header().api_version;
  r.listener = ctx.connection().listener;
  if (ctx.header().client_id) r.client_id = *ctx.header().client_id;
  if (ctx.connection().client_software) r.client_software = ctx.connection().client_software_name();
}

}  // namespace

int16_t txn_api_key(TxnApi api) {
  for (const auto& [a, key] : kTxnApis)
    if (a == api) return static_cast<int16_t>(key);
  return -1;
}

std::string transaction_event_line(const TxnEvent& e, TxnClock::time_point now) {
  const TransactionRecord& t = e.transaction;
  auto error_name = [](int16_t code) {
    const char* name = codec::error_name(code);
    return name ? std::string(name) : std::to_string(code);
  };
  nlohmann::json j = {{"ts", tap::timestamp_now()},
                      {"transaction", std::string(txn_event_name(e.kind))},
                      {"transactional_id", t.transactional_id},
                      {"producer_id", t.producer_id},
                      {"producer_epoch", t.producer_epoch},
                      {"connection", e.connection},
                      {"api", e.connection == 0 ? nlohmann::json() : nlohmann::json(std::string(txn_api_name(e.api)))}};
  switch (e.kind) {
    case TxnEvent::Kind::kBegin: j["client_id"] = t.client_id; break;
    case TxnEvent::Kind::kPartitions: {
      nlohmann::json parts = nlohmann::json::array();
      for (const auto& p : e.added) parts.push_back({{"topic", p.topic}, {"partition", p.partition}});
      j["partitions"] = std::move(parts);
      break;
    }
    case TxnEvent::Kind::kOffsets: j["group"] = e.group; break;
    case TxnEvent::Kind::kError:
      if (e.error) {
        j["error"] = error_name(e.error->error_code);
        j["injected_by"] = e.error->injected_by.empty() ? nlohmann::json() : nlohmann::json(e.error->injected_by);
      }
      break;
    case TxnEvent::Kind::kEnd:
      j["outcome"] = std::string(txn_outcome_name(t.outcome));
      j["duration_ms"] = std::chrono::duration<double, std::milli>(t.duration(now)).count();
      j["records"] = t.records;
      j["partitions"] = t.partitions.size();
      j["cause"] =
          t.cause
              ? nlohmann::json({{"api", std::string(txn_api_name(t.cause->api))},
                                {"error", error_name(t.cause->error_code)},
                                {"injected_by", t.cause->injected_by.empty() ? nlohmann::json() : nlohmann::json(t.cause->injected_by)}})
              : nlohmann::json();
      break;
  }
  return j.dump();
}

std::optional<int32_t> response_correlation_id(codec::Bytes frame) {
  if (frame.size() < 8) return std::nullopt;
  const uint8_t* p = frame.data() + 4;
  return static_cast<int32_t>(static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 | static_cast<uint32_t>(p[2]) << 8 |
                              p[3]);
}

bool txn_request(const stage::RequestContext& ctx, TxnRequest& r) {
  const auto& h = ctx.header();
  auto api = txn_api(h.api_key);
  if (!api || h.header_version < 0) return false;
  // Field by field, so that the partition list keeps its capacity (a caller may reuse `r`).
  r.api = *api;
  r.api_version = 0;
  r.transactional_id = {};
  r.producer_id = -1;
  r.producer_epoch = -1;
  r.partitions.clear();
  r.group_id = {};
  r.commit = false;
  r.transaction_timeout_ms = -1;
  r.records = r.bytes = 0;
  r.batches.clear();
  r.listener = r.client_id = r.client_software = {};
  r.reached_broker = !ctx.answered();
  if (*api == TxnApi::kProduce) {
    if (!read_transactional_produce(ctx.frame().subspan(codec::kFrameSizePrefix + h.size), h.api_version, r)) return false;
    fill_client(r, ctx);
    return true;
  }
  // The message's strings are views into the frame, which outlives the request's use.
  auto m = ctx.message();
  if (!m) return false;
  fill_client(r, ctx);
  switch (*api) {
    case TxnApi::kInitProducerId: {
      const auto& q = static_cast<const codec::InitProducerIdRequest&>(*m);
      if (!q.transactional_id || q.transactional_id->empty()) return false;  // an idempotent producer
      r.transactional_id = *q.transactional_id;
      r.transaction_timeout_ms = q.transaction_timeout_ms;
      r.producer_id = q.producer_id;
      r.producer_epoch = q.producer_epoch;
      break;
    }
    case TxnApi::kAddPartitionsToTxn: {
      const auto& q = static_cast<const codec::AddPartitionsToTxnRequest&>(*m);
      if (h.api_version <= 3) {
        r.transactional_id = q.v3_and_below_transactional_id;
        r.producer_id = q.v3_and_below_producer_id;
        r.producer_epoch = q.v3_and_below_producer_epoch;
        for (const auto& t : q.v3_and_below_topics)
          for (int32_t p : t.partitions) r.partitions.push_back({t.name, p});
      } else {
        // v4+ is the brokers' batched form (KIP-890): one transaction per request is what kproxy
        // tracks; a verification (verify_only) adds nothing to a transaction.
        if (q.transactions.size() != 1 || q.transactions[0].verify_only) return false;
        const auto& x = q.transactions[0];
        r.transactional_id = x.transactional_id;
        r.producer_id = x.producer_id;
        r.producer_epoch = x.producer_epoch;
        for (const auto& t : x.topics)
          for (int32_t p : t.partitions) r.partitions.push_back({t.name, p});
      }
      break;
    }
    case TxnApi::kAddOffsetsToTxn: {
      const auto& q = static_cast<const codec::AddOffsetsToTxnRequest&>(*m);
      r.transactional_id = q.transactional_id;
      r.producer_id = q.producer_id;
      r.producer_epoch = q.producer_epoch;
      r.group_id = q.group_id;
      break;
    }
    case TxnApi::kTxnOffsetCommit: {
      const auto& q = static_cast<const codec::TxnOffsetCommitRequest&>(*m);
      r.transactional_id = q.transactional_id;
      r.producer_id = q.producer_id;
      r.producer_epoch = q.producer_epoch;
      r.group_id = q.group_id;
      for (const auto& t : q.topics) {
        for (const auto& p : t.partitions)
          r.partitions.push_back(h.api_version >= 6 ? PartitionRef{{}, p.partition_index, t.topic_id}
                                                    : PartitionRef{t.name, p.partition_index});
      }
      break;
    }
    case TxnApi::kProduce: break;  // read above
    case TxnApi::kEndTxn: {
      const auto& q = static_cast<const codec::EndTxnRequest&>(*m);
      r.transactional_id = q.transactional_id;
      r.producer_id = q.producer_id;
      r.producer_epoch = q.producer_epoch;
      r.commit = q.committed;
      break;
    }
  }
  return !r.transactional_id.empty();
}

TxnResponse txn_response(const stage::ResponseContext& ctx) {
  TxnResponse out;
  if (auto api = txn_api(ctx.api_key())) out.api = *api;
  out.from_broker = !ctx.synthetic();
  out.delivered = !ctx.withheld();
  // A rule that answered or set an error names itself; an answer no rule built is kproxy's.
  out.injected_by = ctx.actions().injected_by;
  if (ctx.synthetic() && out.injected_by.empty()) out.injected_by = "kproxy";
  // The first error, but not OPERATION_NOT_ATTEMPTED when there is another: an
  // AddPartitionsToTxn refused for one partition says so for the others (all or nothing).
  auto note_into = [](int16_t& first, int16_t code) {
    constexpr auto kNotAttempted = static_cast<int16_t>(codec::ErrorCode::kOperationNotAttempted);
    if (code != 0 && (first == 0 || (first == kNotAttempted && code != kNotAttempted))) first = code;
  };
  auto note = [&](int16_t code) { note_into(out.error_code, code); };
  if (const codec::ResponseScan* scan = ctx.dirty() ? nullptr : ctx.scan()) {
    for (size_t i = 0; i < scan->error_count; ++i) note(scan->errors[i].code);
  }
  auto api = txn_api(ctx.api_key());
  bool need_body = api == TxnApi::kInitProducerId || (api == TxnApi::kEndTxn && ctx.api_version() >= 5) || ctx.dirty() || !ctx.scan();
  if (!need_body) return out;
  auto m = ctx.message();
  if (!m) return out;
  if (ctx.dirty() && !ctx.synthetic()) {
    // A stage changed the body: the scan still describes the broker's bytes, what it said itself.
    if (const codec::ResponseScan* scan = ctx.scan(); scan && !scan->errors_overflow) {
      int16_t broker = 0;
      for (size_t i = 0; i < scan->error_count; ++i) note_into(broker, scan->errors[i].code);
      out.broker_error_code = broker;
    }
  }
  if (out.error_code == 0) {
    m->for_each_error_code(ctx.body_version(), [&](int16_t& code, const codec::ErrorScope&) { note(code); });
  }
  if (out.broker_error_code == out.error_code) out.broker_error_code.reset();  // nothing changed it
  if (api == TxnApi::kInitProducerId) {
    const auto& a = static_cast<const codec::InitProducerIdResponse&>(*m);
    out.producer_id = a.producer_id;
    out.producer_epoch = a.producer_epoch;
  } else if (api == TxnApi::kEndTxn && ctx.api_version() >= 5) {
    const auto& a = static_cast<const codec::EndTxnResponse&>(*m);
    out.producer_id = a.producer_id;
    out.producer_epoch = a.producer_epoch;
  }
  return out;
}

}  // namespace kproxy::observe
