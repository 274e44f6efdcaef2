// Fuzz target: observe::read_transactional_produce (issue #32), the transaction tracker's walk of a
// Produce request body, which reads a client's bytes on every transactional Produce.
//
// Input: [version selector] then the body. Properties: the walk never reads past the body (ASan);
// what it returns views the body; and wherever the codec's own ProduceRequest decoder reads the
// body with a non-empty TransactionalId, the walk reads it too, with the same id and partitions.
#include <cstdint>
#include <string>

#include "codec/generated/messages/produce.h"
#include "codec/reader.h"
#include "proxy/observe/transactional_produce.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;

namespace {

bool inside(codec::Bytes body, std::string_view view) {
  auto* b = reinterpret_cast<const char*>(body.data());
  return view.empty() || (view.data() >= b && view.data() + view.size() <= b + body.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int16_t version = static_cast<int16_t>(3 + data[0] % 11);  // Produce v3-v13: TransactionalId exists
  codec::Bytes body(data + 1, size - 1);
  observe::TxnRequest walked;
  const bool read = observe::read_transactional_produce(body, version, walked);
  if (read) {
    fuzz::check(!walked.transactional_id.empty() && inside(body, walked.transactional_id), "transactional id outside the body");
    fuzz::check(walked.bytes <= body.size() && walked.partitions.size() <= body.size(), "more bytes or partitions than the body holds");
    for (const auto& p : walked.partitions) fuzz::check(inside(body, p.topic), "topic name outside the body");
  }

  codec::ProduceRequest decoded;
  codec::Reader in(body);
  decoded.read(in, version);
  if (!in.ok() || !decoded.transactional_id || decoded.transactional_id->empty()) return 0;
  fuzz::check(read, "the codec reads a transactional Produce the walk refuses");
  fuzz::check(walked.transactional_id == *decoded.transactional_id, "transactional id differs from the codec's");
  size_t at = 0;
  for (const auto& t : decoded.topic_data) {
    for (const auto& p : t.partition_data) {
      fuzz::check(at < walked.partitions.size(), "fewer partitions than the codec reads");
      const auto& w = walked.partitions[at++];
      fuzz::check(w.partition == p.index, "partition index differs from the codec's");
      if (version >= 13) fuzz::check(w.topic_id == t.topic_id, "topic id differs from the codec's");
      else fuzz::check(w.topic == t.name, "topic name differs from the codec's");
    }
  }
  fuzz::check(at == walked.partitions.size(), "more partitions than the codec reads");
  return 0;
}
