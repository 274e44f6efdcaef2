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
#include "proxy/chaos/fault_rule.h"
#include "proxy/tap/tap_event.h"

namespace kproxy::observe {

namespace {

using codec::ApiKey;

/// The transaction APIs and their Kafka keys.
constexpr std::array<std::pair<TxnApi, ApiKey>, 6> kTxnApis = {{{TxnApi::kInitProducerId, ApiKey::kInitProducerId},
                                                                {TxnApi::kAddPartitionsToTxn, ApiKey::kAddPartitionsToTxn},
                                                                {TxnApi::kAddOffsetsToTxn, ApiKey::kAddOffsetsToTxn},
                                                                {TxnApi::kTxnOffsetCommit, ApiKey::kTxnOffsetCommit},
                                                                {TxnApi::kProduce, ApiKey::kProduce},
                                                                {TxnApi::kEndTxn, ApiKey::kEndTxn}}};

/// The producer id and epoch of a record set's first batch header (KIP-98: RecordBatch v2 has
/// the producer id at byte 43 and the epoch at byte 51); false when it is too short for one.
bool batch_producer(codec::Bytes records, int64_t& producer_id, int16_t& producer_epoch) {
  if (records.size() < 53) return false;
  const uint8_t* b = records.data();
  uint64_t pid = 0;
  for (int i = 0; i < 8; ++i) pid = pid << 8 | b[43 + i];
  producer_id = static_cast<int64_t>(pid);
  producer_epoch = static_cast<int16_t>(b[51] << 8 | b[52]);
  return true;
}

/// A bounds-checked cursor over a Produce body, for the walk below: the first read past the end
/// (or a length that cannot be) stops it, and every later read returns nothing. Leaner than
/// codec::Reader (no error text): the walk runs for every transactional Produce.
class ProduceWalk {
 public:
  explicit ProduceWalk(codec::Bytes body) : p_(body.data()), end_(body.data() + body.size()) {}
  bool ok() const { return ok_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  int16_t int16() { return static_cast<int16_t>(big_endian(2)); }
  int32_t int32() { return static_cast<int32_t>(big_endian(4)); }
  /// Kafka's unsigned varint (at most 5 bytes: ByteUtils.readUnsignedVarint).
  uint32_t uvarint() {
    uint32_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      if (p_ == end_) return fail();
      uint8_t b = *p_++;
      v |= static_cast<uint32_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return fail();
  }
  /// A string's, bytes' or array's length: compact (uvarint N+1, 0 for null) or classic (int16
  /// for strings, int32 for bytes and arrays, -1 for null). -1: null.
  int64_t length(bool compact, bool wide) {
    if (compact) return static_cast<int64_t>(uvarint()) - 1;
    return wide ? int32() : int16();
  }
  /// The next `n` bytes (nullptr, and stopped, when fewer are left or n < 0).
  const uint8_t* take(int64_t n) {
    if (n < 0 || static_cast<uint64_t>(n) > left()) return fail(), nullptr;
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  void tagged_fields() {
    for (uint32_t n = uvarint(), i = 0; i < n && ok_; ++i) {
      uvarint();  // tag
      take(uvarint());
    }
  }

 private:
  uint32_t fail() {
    ok_ = false;
    p_ = end_;
    return 0;
  }
  uint32_t big_endian(int n) {
    if (left() < static_cast<size_t>(n)) return fail();
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v = v << 8 | p_[i];
    p_ += n;
    return v;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

/// A transactional Produce (v3+) as the tracker reads it, walked field by field without decoding
/// the request into a message (a Produce is the most frequent frame of a transaction, and most
/// Produce requests are not transactional: those cost the read of the first field). Layout per
/// Kafka's ProduceRequest.json: TransactionalId, Acks, TimeoutMs, TopicData[Name (v0-12) or
/// TopicId (v13+), PartitionData[Index, Records]], compact and with tagged fields from v9.
/// False when it is not transactional or does not read.
bool read_transactional_produce(codec::Bytes body, int16_t version, TxnRequest& r) {
  if (version < 3) return false;
  const bool flexible = version >= 9;
  ProduceWalk in(body);
  const int64_t id_length = in.length(flexible, false);
  const uint8_t* id = in.take(id_length);
  if (!id || id_length == 0) return false;  // null or empty: not transactional
  r.transactional_id = {reinterpret_cast<const char*>(id), static_cast<size_t>(id_length)};
  in.take(sizeof(int16_t) + sizeof(int32_t));  // Acks, TimeoutMs
  const int64_t topics = in.length(flexible, true);
  if (topics < 0 || static_cast<uint64_t>(topics) > in.left()) return false;
  for (int64_t i = 0; i < topics && in.ok(); ++i) {
    PartitionRef topic;
    if (version >= 13) {
      if (const uint8_t* uuid = in.take(16)) std::copy(uuid, uuid + 16, topic.topic_id.begin());
    } else {
      const int64_t name_length = in.length(flexible, false);
      const uint8_t* name = in.take(name_length);
      if (name) topic.topic = {reinterpret_cast<const char*>(name), static_cast<size_t>(name_length)};
    }
    const int64_t partitions = in.length(flexible, true);
    if (partitions < 0 || static_cast<uint64_t>(partitions) > in.left()) return false;
    for (int64_t j = 0; j < partitions && in.ok(); ++j) {
      topic.partition = in.int32();
      const int64_t records_length = in.length(flexible, true);
      const uint8_t* records = records_length < 0 ? nullptr : in.take(records_length);
      if (flexible) in.tagged_fields();
      if (!in.ok()) break;
      r.partitions.push_back(topic);
      if (!records) continue;
      codec::Bytes batches(records, static_cast<size_t>(records_length));
      r.bytes += batches.size();
      r.records += count_records(batches).records;
      if (r.producer_id < 0) batch_producer(batches, r.producer_id, r.producer_epoch);
    }
    if (flexible) in.tagged_fields();
  }
  if (flexible) in.tagged_fields();
  return in.ok();
}

void fill_client(TxnRequest& r, const proxy::RequestContext& ctx) {
  r.api_version = ctx.header().api_version;
  r.listener = ctx.connection().listener;
  if (ctx.header().client_id) r.client_id = *ctx.header().client_id;
  if (ctx.connection().client_software) r.client_software = ctx.connection().client_software_name();
}

}  // namespace

std::optional<TxnApi> txn_api(int16_t api_key) {
  for (const auto& [api, key] : kTxnApis)
    if (static_cast<int16_t>(key) == api_key) return api;
  return std::nullopt;
}

int16_t txn_api_key(TxnApi api) {
  for (const auto& [a, key] : kTxnApis)
    if (a == api) return static_cast<int16_t>(key);
  return -1;
}

RecordCount count_records(codec::Bytes records) {
  // RecordBatch v2 (KIP-98): baseOffset int64, batchLength int32 (bytes after this field), then
  // partitionLeaderEpoch int32, magic int8 (2), crc, attributes, lastOffsetDelta, timestamps,
  // producer id/epoch, baseSequence: the record count is the int32 at byte 57.
  constexpr size_t kLengthEnd = 12, kMagicAt = 16, kCountAt = 57, kHeader = 61;
  RecordCount out;
  size_t at = 0;
  while (at < records.size()) {
    if (records.size() - at < kHeader) {
      ++out.unreadable;
      break;
    }
    auto be32 = [&](size_t i) {
      const uint8_t* p = records.data() + at + i;
      return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 | static_cast<uint32_t>(p[2]) << 8 | p[3];
    };
    uint64_t length = be32(8);
    if (records[at + kMagicAt] != 2 || length > records.size() - at - kLengthEnd) {
      ++out.unreadable;
      break;
    }
    out.records += be32(kCountAt);
    at += kLengthEnd + length;
  }
  return out;
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

bool txn_request(const proxy::RequestContext& ctx, TxnRequest& r) {
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
  r.listener = r.client_id = r.client_software = {};
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

TxnResponse txn_response(const proxy::ResponseContext& ctx) {
  TxnResponse out;
  if (auto api = txn_api(ctx.api_key())) out.api = *api;
  if (ctx.synthetic()) out.injected_by = ctx.actions().answer_rule.empty() ? "kproxy" : ctx.actions().answer_rule;
  for (const auto& rule : ctx.actions().error_rules) {
    if (rule) {
      out.injected_by = rule->name;
      break;
    }
  }
  // The first error, but not OPERATION_NOT_ATTEMPTED when there is another: an
  // AddPartitionsToTxn refused for one partition says so for the others (all or nothing).
  auto note = [&out](int16_t code) {
    constexpr auto kNotAttempted = static_cast<int16_t>(codec::ErrorCode::kOperationNotAttempted);
    if (code != 0 && (out.error_code == 0 || (out.error_code == kNotAttempted && code != kNotAttempted))) out.error_code = code;
  };
  if (const codec::ResponseScan* scan = ctx.dirty() ? nullptr : ctx.scan()) {
    for (size_t i = 0; i < scan->error_count; ++i) note(scan->errors[i].code);
  }
  auto api = txn_api(ctx.api_key());
  bool need_body = api == TxnApi::kInitProducerId || (api == TxnApi::kEndTxn && ctx.api_version() >= 5) || ctx.dirty() || !ctx.scan();
  if (!need_body) return out;
  auto m = ctx.message();
  if (!m) return out;
  if (out.error_code == 0) {
    m->for_each_error_code(ctx.body_version(), [&](int16_t& code, const codec::ErrorScope&) { note(code); });
  }
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
