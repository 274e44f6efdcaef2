// Record contents for the tap, shown only when the config asks for them (tap.records: true).
//
// A record set (the `Records` field of Produce requests and Fetch responses) is a run of record
// batches. For magic v2 batches (KIP-98; Kafka's DefaultRecordBatch.java and DefaultRecord.java)
// the batch header and every record are shown:
//
//   batch:  baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8 (2),
//           crc uint32, attributes int16 (bits 0-2 compression, 3 timestamp type, 4 transactional,
//           5 control), lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
//           producerId int64, producerEpoch int16, baseSequence int32, records count int32
//   record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
//           key (varint length, -1 = null), value (idem), headers count varint, then per header
//           key (varint length + UTF-8) and value (varint length, -1 = null)
//
// Keys, values and header values appear as {"text": "..."} when they are valid UTF-8 without
// control characters (other than tab, CR, LF), else {"base64": "..."}; each with its "size", cut
// to max_record_bytes ("truncated": true). Control records (transaction markers) show their type.
// Compressed batches are not decompressed: their records are counted, not shown. Older message
// formats (magic 0 and 1) are summarised only. A batch cut short (a Fetch may end mid-batch) is
// reported as "partial". Nothing here ever throws on bad input.
#pragma once

#include <cstddef>

#include <nlohmann/json_fwd.hpp>

#include "codec/reader.h"

namespace kproxy::tap {

struct RecordContentLimits {
  size_t max_record_bytes = 256;  ///< bytes of each key, value and header value shown
  size_t max_records = 100;       ///< records shown per record set; the rest are counted
};

/// The record set `records` as JSON: {"bytes", "batches", "records", "batch_list": [...],
/// "records_not_shown"}.
nlohmann::json record_contents(codec::Bytes records, const RecordContentLimits& limits);

/// A byte string as the tap shows it: {"text"} or {"base64"}, "size", "truncated" when cut.
nlohmann::json shown_bytes(codec::Bytes bytes, size_t max_bytes);

}  // namespace kproxy::tap
