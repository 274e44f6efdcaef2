// The transaction tracker's events (proxy/observe/transaction_tracker.h) read from frames: which
// requests belong to a transaction, and what their requests and responses say.
//
// A request is one when its API is InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit or EndTxn with a transactional.id, or a Produce whose TransactionalId is set
// (read from the body's first field without decoding: a non-transactional Produce costs that
// peek and nothing more). Only those are decoded.
#pragma once

#include <cstdint>
#include <optional>

#include "proxy/observe/transaction_tracker.h"
#include "proxy/pipeline/frame_context.h"

namespace kproxy::observe {

/// The transaction API of `api_key`, or nullopt for any other API.
std::optional<TxnApi> txn_api(int16_t api_key);

/// The tracker's view of a request of a transaction API (nullopt: not part of a transaction, or
/// its body does not decode).
std::optional<TxnRequest> txn_request(const proxy::RequestContext& ctx);

/// The tracker's view of the response to such a request: its first error code (0 when none),
/// the producer id and epoch it gives (InitProducerId, EndTxn v5+), and whether a fault rule made
/// it (an error rule names itself; an answer kproxy built is "kproxy").
TxnResponse txn_response(const proxy::ResponseContext& ctx);

/// The correlation id of a response frame (after its size prefix), or nullopt when too short.
std::optional<int32_t> response_correlation_id(codec::Bytes frame);

/// Records in the v2 record batches of `records` (each batch's record count), and the number of
/// batches that could not be read (a record set cut short, or an older message format).
struct RecordCount {
  uint64_t records = 0;
  uint32_t unreadable = 0;
};
RecordCount count_records(codec::Bytes records);

}  // namespace kproxy::observe
