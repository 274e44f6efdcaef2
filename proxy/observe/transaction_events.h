// The transaction tracker's events (proxy/observe/transaction_tracker.h) read from frames: which
// requests belong to a transaction, and what their requests and responses say.
//
// A request is one when its API is InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit or EndTxn with a transactional.id, or a Produce whose TransactionalId is set
// (read from the body's first field without decoding: a non-transactional Produce costs that
// peek and nothing more). Only those are decoded.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "codec/generated/api_keys.h"
#include "proxy/observe/transaction_tracker.h"
#include "proxy/observe/transactional_produce.h"
#include "proxy/stage/frame_context.h"

namespace kproxy::observe {

/// The transaction APIs and their Kafka keys: the one list txn_api, is_txn_api_key and
/// txn_api_key read.
inline constexpr std::array<std::pair<TxnApi, codec::ApiKey>, 6> kTxnApis = {
    {{TxnApi::kInitProducerId, codec::ApiKey::kInitProducerId},
     {TxnApi::kAddPartitionsToTxn, codec::ApiKey::kAddPartitionsToTxn},
     {TxnApi::kAddOffsetsToTxn, codec::ApiKey::kAddOffsetsToTxn},
     {TxnApi::kTxnOffsetCommit, codec::ApiKey::kTxnOffsetCommit},
     {TxnApi::kProduce, codec::ApiKey::kProduce},
     {TxnApi::kEndTxn, codec::ApiKey::kEndTxn}}};

/// The transaction API of `api_key`, or nullopt for any other API. Inline: asked for every frame.
inline std::optional<TxnApi> txn_api(int16_t api_key) {
  for (const auto& [api, key] : kTxnApis)
    if (static_cast<int16_t>(key) == api_key) return api;
  return std::nullopt;
}
/// True for the API keys txn_api knows.
inline bool is_txn_api_key(int16_t api_key) { return txn_api(api_key).has_value(); }
/// Kafka's API key of a transaction API.
int16_t txn_api_key(TxnApi api);

/// The tracker's view of a request of a transaction API, into `out` (false: not part of a
/// transaction, or its body does not decode). `out`'s views point into the frame; reusing one
/// `out` for every request keeps its partition list's memory (no allocation per Produce).
bool txn_request(const stage::RequestContext& ctx, TxnRequest& out);

/// The tracker's view of the response to such a request: its first error code (0 when none),
/// the producer id and epoch it gives (InitProducerId, EndTxn v5+), and whether a fault rule made
/// it (an error rule or an answer rule names itself; "kproxy" for an answer no rule built).
TxnResponse txn_response(const stage::ResponseContext& ctx);

/// One tap line (JSON) for a transaction lifecycle event: {"ts", "transaction": begin |
/// partitions_added | offsets_added | error | end, "transactional_id", "producer_id",
/// "producer_epoch", "connection", "api"} and, by kind, "partitions", "group", "error" and
/// "injected_by", or "outcome", "duration_ms", "records" and "cause".
std::string transaction_event_line(const TxnEvent& event, TxnClock::time_point now);

/// The correlation id of a response frame (after its size prefix), or nullopt when too short.
std::optional<int32_t> response_correlation_id(codec::Bytes frame);

}  // namespace kproxy::observe
