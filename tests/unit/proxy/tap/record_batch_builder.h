// Test helper: v2 record batches laid out as Kafka's DefaultRecordBatch / DefaultRecord write
// them (CRC left 0: the tap does not check it). For tests only.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codec/writer.h"

namespace kproxy::tap::testing {

struct TestRecord {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
};

inline void append_v2_batch(std::vector<uint8_t>& out, int64_t base_offset, const std::vector<TestRecord>& records, int16_t attributes = 0,
                            int64_t base_timestamp = 1700000000000) {
  std::vector<uint8_t> body;
  codec::Writer r(body);
  for (size_t i = 0; i < records.size(); ++i) {
    std::vector<uint8_t> rec;
    codec::Writer w(rec);
    w.int8(0);
    w.varlong(static_cast<int64_t>(i) * 10);  // timestamp delta
    w.varint(static_cast<int32_t>(i));        // offset delta
    auto field = [&](const std::optional<std::string>& s) {
      if (!s) {
        w.varint(-1);
        return;
      }
      w.varint(static_cast<int32_t>(s->size()));
      w.raw(std::string_view(*s));
    };
    field(records[i].key);
    field(records[i].value);
    w.varint(static_cast<int32_t>(records[i].headers.size()));
    for (const auto& [k, v] : records[i].headers) {
      w.varint(static_cast<int32_t>(k.size()));
      w.raw(std::string_view(k));
      field(v);
    }
    r.varint(static_cast<int32_t>(rec.size()));
    r.raw(codec::Bytes(rec.data(), rec.size()));
  }
  codec::Writer w(out);
  w.int64(base_offset);
  w.int32(static_cast<int32_t>(49 + body.size()));  // bytes after this field
  w.int32(0);                                       // partition leader epoch
  w.int8(2);                                        // magic
  w.int32(0);                                       // crc
  w.int16(attributes);
  w.int32(records.empty() ? 0 : static_cast<int32_t>(records.size() - 1));
  w.int64(base_timestamp);
  w.int64(base_timestamp + 10 * static_cast<int64_t>(records.size()));
  w.int64(4000);  // producer id
  w.int16(1);     // producer epoch
  w.int32(0);     // base sequence
  w.int32(static_cast<int32_t>(records.size()));
  w.raw(codec::Bytes(body.data(), body.size()));
}

}  // namespace kproxy::tap::testing
