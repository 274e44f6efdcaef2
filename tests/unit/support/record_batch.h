// A RecordBatch v2 header for unit tests of what reads record batches (the transaction tracker's
// record counts): KIP-98's layout, the records themselves stood for by zero bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "codec/writer.h"

namespace kproxy::testing {

/// A RecordBatch v2 header (61 bytes) for `count` records of producer `pid`/`epoch`, followed
/// by `payload` bytes standing for the records.
inline std::vector<uint8_t> batch(int32_t count, int64_t pid = 77, int16_t epoch = 2, size_t payload = 10) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  w.int64(0);                                        // baseOffset
  w.int32(static_cast<int32_t>(61 - 12 + payload));  // batchLength
  w.int32(0);                                        // partitionLeaderEpoch
  out.push_back(2);                                  // magic
  w.int32(0);                                        // crc (not checked here)
  w.int16(0x10);                                     // attributes: transactional
  w.int32(count - 1);                                // lastOffsetDelta
  w.int64(0);                                        // baseTimestamp
  w.int64(0);                                        // maxTimestamp
  w.int64(pid);
  w.int16(epoch);
  w.int32(0);  // baseSequence
  w.int32(count);
  out.resize(out.size() + payload, 0);
  return out;
}

}  // namespace kproxy::testing
