// Version-correct error codes for injected faults (docs/faults.md
// "Version-correct error codes").
//
// Old clients do not know newer error codes, so the broker itself sends an older equivalent:
//   PRODUCER_FENCED (90) → INVALID_PRODUCER_EPOCH (47) for InitProducerId < v4 (KafkaApis
//     handleInitProducerIdRequest), EndTxn < v2 (handleEndTxnRequest), AddOffsetsToTxn < v2
//     (handleAddOffsetsToTxnRequest) and AddPartitionsToTxn < v2 (handleAddPartitionsToTxnRequest),
//     all added with KIP-588;
//   TRANSACTION_ABORTABLE (120) → INVALID_TXN_STATE (48) for Produce <= v10, TxnOffsetCommit < v4,
//     AddOffsetsToTxn < v4, AddPartitionsToTxn < v5 and EndTxn < v4 (KIP-890: only the bumped
//     versions may carry it; ReplicaManager / KafkaApis return INVALID_TXN_STATE otherwise);
//   CONCURRENT_TRANSACTIONS (51) → NOT_ENOUGH_REPLICAS (19) for Produce <= v11: the partition
//     leader's transaction verification answers a Produce so unless the request is of
//     transaction.version 2 (Produce v12+, KIP-890 part 2), whose clients retry
//     CONCURRENT_TRANSACTIONS itself (ReplicaManager, KAFKA-18662).
// kproxy translates the same way. Codes that no version of an API can carry (e.g.
// TRANSACTION_ABORTABLE on FindCoordinator, TRANSACTIONAL_ID_NOT_FOUND outside
// DescribeTransactions) are refused when a rule is set.
#pragma once

#include <cstdint>
#include <string>

namespace kproxy::chaos {

/// The code to send for `code` to a client of `api_key` at `version`.
int16_t translate_error(int16_t api_key, int16_t version, int16_t code);

/// "" when `code` may be injected for `api_key` (some version), else why not.
std::string refuse_error(int16_t api_key, int16_t code);

}  // namespace kproxy::chaos
