// The transactional Produce request as the transaction tracker reads it: walked field by field,
// bounds-checked, without decoding it into a message (docs/transactions.md "Cost and bounds").
// Apart from the rest of the observatory so that it can be fuzzed alone (tests/fuzz): it reads a
// client's bytes.
#pragma once

#include <cstdint>

#include "codec/reader.h"
#include "proxy/observe/transaction_tracker.h"

namespace kproxy::observe {

/// Reads a Produce request body of `version` into `out` when its TransactionalId is set: the id,
/// each partition (by name, or by topic id from v13), the records and record-batch bytes, and the
/// producer id and epoch of the first batch. Appends to out.partitions. False when it is not
/// transactional (v0-2, a null or empty id) or the body does not read; never reads past `body`.
bool read_transactional_produce(codec::Bytes body, int16_t version, TxnRequest& out);

/// A peek at a Produce request body's first field: false when its TransactionalId is null or
/// empty (v0-2 have none), so the request is no transaction's. A few instructions, where
/// read_transactional_produce sets up a walk of the whole body: most Produce requests are not
/// transactional (bench/proxy/profile --features measured the tracker at 7 % of a non-transactional
/// 1 KiB Produce before it peeked first). True when the body is too short to tell: the full read
/// decides then.
inline bool produce_names_transaction(codec::Bytes body, int16_t version) {
  if (version < 3) return false;
  if (version >= 9) {  // COMPACT_NULLABLE_STRING: unsigned varint of length + 1 (0 is null)
    if (body.empty()) return true;
    return body[0] > 1 || (body[0] & 0x80) != 0;  // 0: null, 1: empty; a multi-byte varint is long
  }
  if (body.size() < 2) return true;  // NULLABLE_STRING: int16 length, -1 is null
  return static_cast<int16_t>((body[0] << 8) | body[1]) > 0;
}

/// Records in the v2 record batches of `records` (each batch's record count), and the number of
/// batches that could not be read (a record set cut short, or an older message format).
struct RecordCount {
  uint64_t records = 0;
  uint32_t unreadable = 0;
};
RecordCount count_records(codec::Bytes records);

}  // namespace kproxy::observe
