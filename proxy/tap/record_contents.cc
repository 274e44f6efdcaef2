#include "proxy/tap/record_contents.h"

#include <nlohmann/json.hpp>

#include "codec/message_support.h"

namespace kproxy::tap {
namespace {

const char* compression_name(int codec) {
  switch (codec) {
    case 0: return "none";
    case 1: return "gzip";
    case 2: return "snappy";
    case 3: return "lz4";
    case 4: return "zstd";
    default: return "unknown";
  }
}

// Length of the valid UTF-8 prefix of `b` no longer than `max` (never cutting a sequence), or
// SIZE_MAX when `b` is not printable UTF-8 text.
size_t text_prefix(codec::Bytes b, size_t max) {
  size_t i = 0, cut = 0;
  while (i < b.size()) {
    uint8_t c = b[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > b.size()) return SIZE_MAX;
    if (n == 1 && ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)) return SIZE_MAX;
    for (size_t k = 1; k < n; ++k) {
      if ((b[i + k] & 0xc0) != 0x80) return SIZE_MAX;
    }
    if (n == 2 && c < 0xc2) return SIZE_MAX;  // overlong
    i += n;
    if (i <= max) cut = i;
  }
  return cut;
}

nlohmann::json nullable_bytes(codec::Reader& r, size_t max) {
  int32_t len = r.varint();
  if (!r.ok() || len < 0) return nullptr;
  if (static_cast<size_t>(len) > r.remaining()) {
    r.fail("record field longer than its batch");
    return nullptr;
  }
  return shown_bytes(r.raw(static_cast<size_t>(len)), max);
}

// One record of a v2 batch (DefaultRecord.readFrom).
nlohmann::json record_json(codec::Reader& r, int64_t base_offset, int64_t base_timestamp, bool control, size_t max) {
  int32_t length = r.varint();
  if (!r.ok() || length < 0 || static_cast<size_t>(length) > r.remaining()) {
    r.fail("record length outside its batch");
    return nullptr;
  }
  codec::Reader body(r.raw(static_cast<size_t>(length)));
  nlohmann::json j;
  body.int8();  // attributes: unused by Kafka
  int64_t ts_delta = body.varlong();
  int32_t offset_delta = body.varint();
  j["offset"] = base_offset + offset_delta;
  j["timestamp"] = base_timestamp + ts_delta;
  auto key_start = body.offset();
  j["key"] = nullable_bytes(body, max);
  auto key_end = body.offset();
  j["value"] = nullable_bytes(body, max);
  int32_t headers = body.varint();
  if (body.ok() && headers > 0) {
    nlohmann::json list = nlohmann::json::array();
    for (int32_t h = 0; h < headers && body.ok(); ++h) {
      int32_t klen = body.varint();
      if (!body.ok() || klen < 0 || static_cast<size_t>(klen) > body.remaining()) {
        body.fail("header key outside its record");
        break;
      }
      codec::Bytes k = body.raw(static_cast<size_t>(klen));
      list.push_back({{"key", std::string(reinterpret_cast<const char*>(k.data()), k.size())}, {"value", nullable_bytes(body, max)}});
    }
    j["headers"] = std::move(list);
  }
  if (control) {
    // Control record key: version int16, type int16 (0 = ABORT, 1 = COMMIT): ControlRecordType.java.
    codec::Bytes whole = body.data();
    if (key_end - key_start >= 5) {
      codec::Reader key(whole.subspan(key_start + 1, 4));  // after the 1-byte varint length
      key.int16();
      int16_t type = key.int16();
      j["control"] = type == 0 ? "ABORT" : type == 1 ? "COMMIT" : "type " + std::to_string(type);
    }
  }
  if (!body.ok()) j["error"] = body.error();
  return j;
}

}  // namespace

nlohmann::json shown_bytes(codec::Bytes bytes, size_t max_bytes) {
  nlohmann::json j;
  size_t text = text_prefix(bytes, max_bytes);
  size_t shown = std::min(bytes.size(), max_bytes);
  if (text != SIZE_MAX) {
    shown = text;
    j["text"] = std::string(reinterpret_cast<const char*>(bytes.data()), shown);
  } else {
    j["base64"] = codec::base64(bytes.subspan(0, shown), false, true);
  }
  j["size"] = bytes.size();
  if (shown < bytes.size()) j["truncated"] = true;
  return j;
}

nlohmann::json record_contents(codec::Bytes records, const RecordContentLimits& limits) {
  nlohmann::json out = {{"bytes", records.size()}};
  nlohmann::json batches = nlohmann::json::array();
  size_t batch_count = 0, record_count = 0, shown = 0, not_shown = 0;
  size_t pos = 0;
  while (pos + 12 <= records.size()) {
    codec::Reader head(records.subspan(pos));
    int64_t base_offset = head.int64();
    int32_t batch_length = head.int32();
    nlohmann::json b = {{"base_offset", base_offset}};
    if (batch_length < 0 || pos + 12 + static_cast<size_t>(batch_length) > records.size()) {
      b["partial"] = true;  // a fetch may end with the first bytes of a batch
      batches.push_back(std::move(b));
      break;
    }
    codec::Reader r(records.subspan(pos + 12, static_cast<size_t>(batch_length)));
    pos += 12 + static_cast<size_t>(batch_length);
    ++batch_count;
    r.int32();  // partition leader epoch
    int8_t magic = r.int8();
    b["magic"] = magic;
    if (!r.ok() || magic < 2) {
      b["contents"] = "message format v0/v1: not shown";
      ++record_count;
      batches.push_back(std::move(b));
      continue;
    }
    r.uint32();  // crc (CRC-32C): kproxy forwards, the broker checks
    int16_t attributes = r.int16();
    int32_t last_offset_delta = r.int32();
    int64_t base_timestamp = r.int64();
    int64_t max_timestamp = r.int64();
    int64_t producer_id = r.int64();
    int16_t producer_epoch = r.int16();
    int32_t base_sequence = r.int32();
    int32_t count = r.int32();
    if (!r.ok()) {
      b["error"] = r.error();
      batches.push_back(std::move(b));
      continue;
    }
    int compression = attributes & 0x7;
    bool control = (attributes & 0x20) != 0;
    b["compression"] = compression_name(compression);
    b["timestamp_type"] = (attributes & 0x8) ? "LogAppendTime" : "CreateTime";
    b["transactional"] = (attributes & 0x10) != 0;
    if (control) b["control"] = true;
    b["last_offset_delta"] = last_offset_delta;
    b["base_timestamp"] = base_timestamp;
    b["max_timestamp"] = max_timestamp;
    b["producer_id"] = producer_id;
    b["producer_epoch"] = producer_epoch;
    b["base_sequence"] = base_sequence;
    b["record_count"] = count;
    if (count > 0) record_count += static_cast<size_t>(count);
    if (compression != 0) {
      b["contents"] = "compressed: records not shown";
      not_shown += count > 0 ? static_cast<size_t>(count) : 0;
      batches.push_back(std::move(b));
      continue;
    }
    nlohmann::json list = nlohmann::json::array();
    for (int32_t i = 0; i < count && r.ok(); ++i) {
      if (shown >= limits.max_records) {
        not_shown += static_cast<size_t>(count - i);
        break;
      }
      list.push_back(record_json(r, base_offset, base_timestamp, control, limits.max_record_bytes));
      ++shown;
    }
    if (!r.ok()) b["error"] = r.error();
    b["records"] = std::move(list);
    batches.push_back(std::move(b));
  }
  out["batches"] = batch_count;
  out["records"] = record_count;
  out["batch_list"] = std::move(batches);
  if (not_shown > 0) out["records_not_shown"] = not_shown;
  return out;
}

}  // namespace kproxy::tap
