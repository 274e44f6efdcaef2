// Answer builders: the error response kproxy sends in place of the broker's when an `answer`
// rule fires (the request is never forwarded).
//
// The response mirrors the request the way the broker's own error path does (the requested
// topics/partitions/transactions each carry the code; ids and epochs are -1): per-API builders for
// InitProducerId, AddPartitionsToTxn (v0-3 per topic, v4+ batched per transaction), AddOffsetsToTxn,
// TxnOffsetCommit, EndTxn, WriteTxnMarkers, DescribeTransactions, ListTransactions,
// FindCoordinator (v0-3 and v4+ batched keys) and Produce. Any other API whose response has a
// top-level ErrorCode at that version gets a default response with that code set.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codec/message.h"

namespace kproxy::chaos {

/// "" when an answer can be built for `api_key` at `version`, else why not.
std::string answer_refusal(int16_t api_key, int16_t version);

/// Builds the error response to `request` (decoded at `version`), every error code = `error_code`.
/// nullptr when answer_refusal() is not "".
std::unique_ptr<codec::Message> build_answer(const codec::Message& request, int16_t version, int16_t error_code);

/// Sets ThrottleTimeMs in a response, when its type has one at `version`. False otherwise.
bool set_throttle_time(codec::Message& response, int16_t version, int32_t throttle_ms);

}  // namespace kproxy::chaos
