#include "proxy/observe/transactional_produce.h"

#include <algorithm>

namespace kproxy::observe {

namespace {

/// The producer id, epoch and base sequence of a record set's first batch (KIP-98: RecordBatch v2
/// has the producer id at byte 43, the epoch at 51, the base sequence at 53); false when the set is
/// too short for a batch header or its magic is not 2.
struct FirstBatch {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
};
bool first_batch(codec::Bytes records, FirstBatch& out) {
  if (records.size() < 61 || records[16] != 2) return false;
  const uint8_t* b = records.data();
  uint64_t pid = 0;
  for (int i = 0; i < 8; ++i) pid = pid << 8 | b[43 + i];
  out.producer_id = static_cast<int64_t>(pid);
  out.producer_epoch = static_cast<int16_t>(b[51] << 8 | b[52]);
  out.base_sequence = static_cast<int32_t>(static_cast<uint32_t>(b[53]) << 24 | static_cast<uint32_t>(b[54]) << 16 |
                                           static_cast<uint32_t>(b[55]) << 8 | b[56]);
  return true;
}

/// A bounds-checked cursor over a Produce body, for the walk below: the first read past the end
/// (or a length that cannot be) stops it, and every later read returns nothing. Leaner than
/// codec::Reader (no error text): the walk runs for every transactional Produce.
class ProduceWalk {
 public:
  explicit ProduceWalk(codec::Bytes body) : p_(body.data()), end_(body.data() + body.size()) {}
  bool ok() const { return ok_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  int16_t int16() { return static_cast<int16_t>(big_endian(2)); }
  int32_t int32() { return static_cast<int32_t>(big_endian(4)); }
  /// Kafka's unsigned varint (at most 5 bytes: ByteUtils.readUnsignedVarint).
  uint32_t uvarint() {
    uint32_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      if (p_ == end_) return fail();
      uint8_t b = *p_++;
      v |= static_cast<uint32_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return fail();
  }
  /// A string's, bytes' or array's length: compact (uvarint N+1, 0 for null) or classic (int16
  /// for strings, int32 for bytes and arrays, -1 for null). Negative: null. As Kafka's readers
  /// (and codec::Reader) do, the compact form is read into an int32, so a uvarint past 2^31 is a
  /// negative length, which counts as null.
  int64_t length(bool compact, bool wide) {
    if (compact) return static_cast<int32_t>(uvarint() - 1u);
    return wide ? int32() : int16();
  }
  /// The next `n` bytes (nullptr, and stopped, when fewer are left or n < 0).
  const uint8_t* take(int64_t n) {
    if (n < 0 || static_cast<uint64_t>(n) > left()) return fail(), nullptr;
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  void tagged_fields() {
    for (uint32_t n = uvarint(), i = 0; i < n && ok_; ++i) {
      uvarint();  // tag
      take(uvarint());
    }
  }

 private:
  uint32_t fail() {
    ok_ = false;
    p_ = end_;
    return 0;
  }
  uint32_t big_endian(int n) {
    if (left() < static_cast<size_t>(n)) return fail();
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v = v << 8 | p_[i];
    p_ += n;
    return v;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

}  // namespace

// Layout per Kafka's ProduceRequest.json: TransactionalId, Acks, TimeoutMs, TopicData[Name (v0-12)
// or TopicId (v13+), PartitionData[Index, Records]], compact and with tagged fields from v9. Most
// Produce requests are not transactional: those cost the read of the first field.

bool read_transactional_produce(codec::Bytes body, int16_t version, TxnRequest& r) {
  if (version < 3) return false;
  const bool flexible = version >= 9;
  ProduceWalk in(body);
  const int64_t id_length = in.length(flexible, false);
  if (id_length <= 0) return false;  // null or empty: not transactional
  const uint8_t* id = in.take(id_length);
  if (!id) return false;
  r.transactional_id = {reinterpret_cast<const char*>(id), static_cast<size_t>(id_length)};
  in.take(sizeof(int16_t) + sizeof(int32_t));  // Acks, TimeoutMs
  const int64_t topics = in.length(flexible, true);
  if (topics < 0 || static_cast<uint64_t>(topics) > in.left()) return false;
  for (int64_t i = 0; i < topics && in.ok(); ++i) {
    PartitionRef topic;
    if (version >= 13) {
      if (const uint8_t* uuid = in.take(16)) std::copy(uuid, uuid + 16, topic.topic_id.begin());
    } else {
      const int64_t name_length = in.length(flexible, false);
      const uint8_t* name = in.take(name_length);
      if (name) topic.topic = {reinterpret_cast<const char*>(name), static_cast<size_t>(name_length)};
    }
    const int64_t partitions = in.length(flexible, true);
    if (partitions < 0 || static_cast<uint64_t>(partitions) > in.left()) return false;
    for (int64_t j = 0; j < partitions && in.ok(); ++j) {
      topic.partition = in.int32();
      const int64_t records_length = in.length(flexible, true);
      const uint8_t* records = records_length < 0 ? nullptr : in.take(records_length);
      if (flexible) in.tagged_fields();
      if (!in.ok()) break;
      r.partitions.push_back(topic);
      if (!records) continue;
      codec::Bytes batches(records, static_cast<size_t>(records_length));
      r.bytes += batches.size();
      const uint64_t records_here = count_records(batches).records;
      r.records += records_here;
      if (FirstBatch first; first_batch(batches, first)) {
        if (r.producer_id < 0) {
          r.producer_id = first.producer_id;
          r.producer_epoch = first.producer_epoch;
        }
        r.batches.push_back({topic, first.base_sequence, records_here});
      }
    }
    if (flexible) in.tagged_fields();
  }
  if (flexible) in.tagged_fields();
  return in.ok();
}

RecordCount count_records(codec::Bytes records) {
  // RecordBatch v2 (KIP-98): baseOffset int64, batchLength int32 (bytes after this field), then
  // partitionLeaderEpoch int32, magic int8 (2), crc, attributes, lastOffsetDelta, timestamps,
  // producer id/epoch, baseSequence: the record count is the int32 at byte 57.
  constexpr size_t kLengthEnd = 12, kMagicAt = 16, kCountAt = 57, kHeader = 61;
  RecordCount out;
  size_t at = 0;
  while (at < records.size()) {
    if (records.size() - at < kHeader) {
      ++out.unreadable;
      break;
    }
    auto be32 = [&](size_t i) {
      const uint8_t* p = records.data() + at + i;
      return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 | static_cast<uint32_t>(p[2]) << 8 | p[3];
    };
    uint64_t length = be32(8);
    if (records[at + kMagicAt] != 2 || length > records.size() - at - kLengthEnd) {
      ++out.unreadable;
      break;
    }
    out.records += be32(kCountAt);
    at += kLengthEnd + length;
  }
  return out;
}

}  // namespace kproxy::observe
