#include "codec/generated/response_scan.h"

#include <cstring>
#include <vector>

#include <doctest/doctest.h>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/generated/testing/fill.h"
#include "codec/message.h"
#include "codec/testing/filler.h"
#include "codec/writer.h"

using namespace kproxy;

namespace {

std::vector<uint8_t> encode(const codec::Message& m, int16_t version) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  m.write(w, version);
  return out;
}

struct Expected {
  int16_t code;
  int depth;
};

}  // namespace

TEST_CASE("response scan: every response API and version, the codes, depths and offsets the codec visits") {
  size_t bodies = 0, with_errors = 0;
  for (int16_t key : codec::all_api_keys()) {
    auto range = codec::response_versions(key);
    for (int16_t version = range.min; version <= range.max; ++version) {
      for (uint64_t seed = 1; seed <= 40; ++seed) {
        codec::testing::Filler filler(seed * 7919 + static_cast<uint64_t>(key) * 131 + static_cast<uint64_t>(version));
        auto message = codec::testing::make_instance(key, false, version, filler);
        REQUIRE(message);
        std::vector<Expected> expected;
        message->for_each_error_code(version, [&](int16_t& code, const codec::ErrorScope& scope) {
          if (code != 0) expected.push_back({code, scope.depth});
        });
        std::vector<uint8_t> body = encode(*message, version);
        codec::ResponseScan scan;
        INFO(codec::api_name(key), " v", version, " seed ", seed);
        REQUIRE(codec::scan_response(key, version, codec::Bytes(body.data(), body.size()), scan));
        ++bodies;
        with_errors += expected.empty() ? 0 : 1;
        CHECK(scan.errors_overflow == (expected.size() > codec::ResponseScan::kMaxErrors));
        REQUIRE(scan.error_count == std::min(expected.size(), codec::ResponseScan::kMaxErrors));
        for (size_t i = 0; i < scan.error_count; ++i) {
          CHECK(scan.errors[i].code == expected[i].code);
          CHECK(scan.errors[i].depth == expected[i].depth);
          // The offset points at the code itself (big-endian int16).
          REQUIRE(scan.errors[i].offset + 2 <= body.size());
          int16_t at = static_cast<int16_t>((body[scan.errors[i].offset] << 8) | body[scan.errors[i].offset + 1]);
          CHECK(at == expected[i].code);
        }
      }
    }
  }
  MESSAGE(bodies, " bodies scanned, ", with_errors, " with non-zero codes");
  CHECK(with_errors > bodies / 4);  // the random instances do exercise the reporting
}

TEST_CASE("response scan: an offset lets a code be patched in place") {
  codec::ProduceResponse r;
  auto& t = r.responses.emplace_back();
  t.name = "orders";
  t.partition_responses.resize(3);
  t.partition_responses[1].index = 1;
  t.partition_responses[1].error_code = 6;  // NOT_LEADER_OR_FOLLOWER
  std::vector<uint8_t> body = encode(r, 12);
  codec::ResponseScan scan;
  REQUIRE(codec::scan_response(0, 12, codec::Bytes(body.data(), body.size()), scan));
  REQUIRE(scan.error_count == 1);
  CHECK(scan.errors[0].code == 6);
  CHECK(scan.errors[0].depth == 2);
  body[scan.errors[0].offset + 1] = 7;  // REQUEST_TIMED_OUT
  codec::ProduceResponse decoded;
  codec::Reader reader(codec::Bytes(body.data(), body.size()));
  decoded.read(reader, 12);
  REQUIRE(reader.ok());
  CHECK(decoded.responses[0].partition_responses[1].error_code == 7);
}

TEST_CASE("response scan: top-level tagged fields (KIP-951 NodeEndpoints, tag 0)") {
  codec::ProduceResponse r;
  r.responses.emplace_back().partition_responses.resize(1);
  std::vector<uint8_t> plain = encode(r, 12);
  codec::ResponseScan scan;
  REQUIRE(codec::scan_response(0, 12, codec::Bytes(plain.data(), plain.size()), scan));
  CHECK(scan.top_level_tags == 0);
  CHECK_FALSE(scan.has_top_level_tag(0));

  auto& node = r.node_endpoints.emplace_back();
  node.node_id = 3;
  node.host = "broker-3.internal";
  node.port = 9092;
  std::vector<uint8_t> with_nodes = encode(r, 12);
  REQUIRE(codec::scan_response(0, 12, codec::Bytes(with_nodes.data(), with_nodes.size()), scan));
  CHECK(scan.has_top_level_tag(0));
  CHECK(scan.top_level_tags == 1);

  codec::FetchResponse f;
  f.node_endpoints.emplace_back().node_id = 1;
  std::vector<uint8_t> fetch = encode(f, 17);
  REQUIRE(codec::scan_response(1, 17, codec::Bytes(fetch.data(), fetch.size()), scan));
  CHECK(scan.has_top_level_tag(0));
  CHECK_FALSE(scan.has_top_level_tag(64));  // out of range: never set
}

TEST_CASE("response scan: a scan resets what the previous one found") {
  codec::ProduceResponse r;
  r.responses.emplace_back().partition_responses.emplace_back().error_code = 3;
  r.node_endpoints.emplace_back();
  std::vector<uint8_t> a = encode(r, 11);
  codec::ProduceResponse clean;
  std::vector<uint8_t> b = encode(clean, 11);
  codec::ResponseScan scan;
  REQUIRE(codec::scan_response(0, 11, codec::Bytes(a.data(), a.size()), scan));
  CHECK(scan.error_count == 1);
  REQUIRE(codec::scan_response(0, 11, codec::Bytes(b.data(), b.size()), scan));
  CHECK(scan.error_count == 0);
  CHECK(scan.top_level_tags == 0);
}

TEST_CASE("response scan: truncated, trailing, unknown api or version are refused") {
  codec::testing::Filler filler(11);
  auto message = codec::testing::make_instance(1, false, 17, filler);  // Fetch v17 with records
  std::vector<uint8_t> body = encode(*message, 17);
  codec::ResponseScan scan;
  for (size_t cut = 0; cut < body.size(); ++cut) {
    CHECK_FALSE(codec::scan_response(1, 17, codec::Bytes(body.data(), cut), scan));
  }
  CHECK(codec::scan_response(1, 17, codec::Bytes(body.data(), body.size()), scan));
  body.push_back(0);
  CHECK_FALSE(codec::scan_response(1, 17, codec::Bytes(body.data(), body.size()), scan));
  body.pop_back();
  CHECK_FALSE(codec::scan_response(1, 99, codec::Bytes(body.data(), body.size()), scan));
  CHECK_FALSE(codec::scan_response(-1, 0, codec::Bytes(body.data(), body.size()), scan));
  CHECK_FALSE(codec::scan_response(30000, 0, codec::Bytes(body.data(), body.size()), scan));
}

TEST_CASE("response scan: a null in a non-nullable array is refused as the decoder refuses it") {
  // ProduceResponse v12: Responses is compact, not nullable: count 0 (uvarint) means null.
  std::vector<uint8_t> body = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  codec::ResponseScan scan;
  CHECK_FALSE(codec::scan_response(0, 12, codec::Bytes(body.data(), body.size()), scan));
  codec::ProduceResponse decoded;
  codec::Reader reader(codec::Bytes(body.data(), body.size()));
  decoded.read(reader, 12);
  CHECK_FALSE(reader.ok());
}
