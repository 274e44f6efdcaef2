#include "proxy/chaos/error_translation.h"

#include "codec/generated/api_keys.h"
#include "codec/generated/error_code.h"

namespace kproxy::chaos {

namespace {
constexpr int16_t kProducerFenced = 90;
constexpr int16_t kInvalidProducerEpoch = 47;
constexpr int16_t kTransactionAbortable = 120;
constexpr int16_t kInvalidTxnState = 48;
constexpr int16_t kTransactionalIdNotFound = 105;
constexpr int16_t kConcurrentTransactions = 51;
constexpr int16_t kNotEnoughReplicas = 19;
// The first Produce version of transaction.version 2 (KIP-890 part 2): the leader sends it
// CONCURRENT_TRANSACTIONS as it is, older versions NOT_ENOUGH_REPLICAS.
constexpr int16_t kFirstProduceOfTransactionVersion2 = 12;

// First version of each API that may carry TRANSACTION_ABORTABLE (KIP-890); -1 = none.
int16_t first_abortable_version(int16_t api) {
  switch (static_cast<codec::ApiKey>(api)) {
    case codec::ApiKey::kProduce: return 11;
    case codec::ApiKey::kAddPartitionsToTxn: return 5;
    case codec::ApiKey::kEndTxn: return 4;
    case codec::ApiKey::kTxnOffsetCommit: return 4;
    case codec::ApiKey::kAddOffsetsToTxn: return 4;
    default: return -1;
  }
}

// First version that may carry PRODUCER_FENCED (KIP-588); -1 = none translated.
int16_t first_fenced_version(int16_t api) {
  switch (static_cast<codec::ApiKey>(api)) {
    case codec::ApiKey::kInitProducerId: return 4;
    case codec::ApiKey::kEndTxn: return 2;
    case codec::ApiKey::kAddOffsetsToTxn: return 2;
    case codec::ApiKey::kAddPartitionsToTxn: return 2;
    default: return -1;
  }
}
}  // namespace

int16_t translate_error(int16_t api_key, int16_t version, int16_t code) {
  if (code == kProducerFenced) {
    int16_t first = first_fenced_version(api_key);
    if (first >= 0 && version < first) return kInvalidProducerEpoch;
  }
  if (code == kTransactionAbortable) {
    int16_t first = first_abortable_version(api_key);
    if (first >= 0 && version < first) return kInvalidTxnState;
  }
  if (code == kConcurrentTransactions && static_cast<codec::ApiKey>(api_key) == codec::ApiKey::kProduce &&
      version < kFirstProduceOfTransactionVersion2) {
    return kNotEnoughReplicas;
  }
  return code;
}

std::string refuse_error(int16_t api_key, int16_t code) {
  const char* api = codec::api_name(api_key);
  std::string api_text = api ? api : std::to_string(api_key);
  if (code == kTransactionAbortable && first_abortable_version(api_key) < 0) {
    return "TRANSACTION_ABORTABLE is not a valid error for " + api_text +
           " (only Produce, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn carry it)";
  }
  if (code == kTransactionalIdNotFound && static_cast<codec::ApiKey>(api_key) != codec::ApiKey::kDescribeTransactions) {
    return "TRANSACTIONAL_ID_NOT_FOUND is only returned by DescribeTransactions, not " + api_text;
  }
  return "";
}

}  // namespace kproxy::chaos
