// Generated messages: seed vectors byte for byte, round trips of every API × version × direction,
// malformed input, tagged fields, and the error-code and entity visitors.
#include "codec/generated/messages.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/generated/api_keys.h"
#include "codec/generated/testing/fill.h"
#include "tests/unit/codec/test_vectors.h"

using namespace kproxy::codec;
using kproxy::codec::test::encode_frame;
using kproxy::codec::test::hex;
using kproxy::codec::test::load_vector;

namespace {

std::vector<uint8_t> encode(const Message& m, int16_t version) {
  std::vector<uint8_t> out;
  Writer w(out);
  m.write(w, version);
  return out;
}

RequestHeaderData request_header(int16_t key, int16_t version, int32_t correlation_id = 0,
                                 std::optional<std::string_view> client_id = std::string_view{}) {
  RequestHeaderData h;
  h.request_api_key = key;
  h.request_api_version = version;
  h.correlation_id = correlation_id;
  h.client_id = client_id;
  return h;
}

ResponseHeaderData response_header(int32_t correlation_id = 0) {
  ResponseHeaderData h;
  h.correlation_id = correlation_id;
  return h;
}

// Decodes the body of a vector frame (after the size prefix and a header of `header_size` bytes).
template <typename T>
T decode_body(const std::vector<uint8_t>& frame, size_t header_size, int16_t version) {
  Bytes body = Bytes(frame).subspan(4 + header_size);
  Reader r(body);
  T m;
  m.read(r, version);
  INFO(r.error());
  CHECK(r.ok());
  CHECK(r.at_end());
  return m;
}

uint64_t base_seed() {
  if (const char* s = std::getenv("KPROXY_CODEC_SEED")) return std::strtoull(s, nullptr, 0);
  return 0x6b70726f7879ull;  // "kproxy"
}

}  // namespace

TEST_CASE("AddPartitionsToTxn v5 matches seed vector 000 byte for byte") {
  auto want_req = load_vector("add_partitions_to_txn_v5_request.hex");
  AddPartitionsToTxnRequest req;
  auto& txn = req.transactions.emplace_back();
  txn.topics.emplace_back().partitions.push_back(0);
  CHECK(hex(encode_frame(request_header(24, 5), 2, req, 5)) == hex(want_req));
  auto back = decode_body<AddPartitionsToTxnRequest>(want_req, 11, 5);
  REQUIRE(back.transactions.size() == 1);
  CHECK(back.transactions[0].topics[0].partitions == std::vector<int32_t>{0});

  auto want_resp = load_vector("add_partitions_to_txn_v5_response.hex");
  AddPartitionsToTxnResponse resp;
  resp.results_by_transaction.emplace_back().topic_results.emplace_back().results_by_partition.emplace_back();
  CHECK(hex(encode_frame(response_header(), 1, resp, 5)) == hex(want_resp));
  auto back_resp = decode_body<AddPartitionsToTxnResponse>(want_resp, 5, 5);
  CHECK(back_resp.results_by_transaction.at(0).topic_results.at(0).results_by_partition.size() == 1);
}

TEST_CASE("WriteTxnMarkers v1 matches seed vector 001 byte for byte") {
  auto want_req = load_vector("write_txn_markers_v1_request.hex");
  WriteTxnMarkersRequest req;
  req.markers.emplace_back().topics.emplace_back().partition_indexes.push_back(0);
  CHECK(hex(encode_frame(request_header(27, 1), 2, req, 1)) == hex(want_req));
  decode_body<WriteTxnMarkersRequest>(want_req, 11, 1);

  auto want_resp = load_vector("write_txn_markers_v1_response.hex");
  WriteTxnMarkersResponse resp;
  resp.markers.emplace_back().topics.emplace_back().partitions.emplace_back();
  CHECK(hex(encode_frame(response_header(), 1, resp, 1)) == hex(want_resp));
  decode_body<WriteTxnMarkersResponse>(want_resp, 5, 1);
}

TEST_CASE("DescribeTransactions v0 matches seed vector 002 byte for byte") {
  auto want_req = load_vector("describe_transactions_v0_request.hex");
  DescribeTransactionsRequest req;
  req.transactional_ids.push_back("");
  CHECK(hex(encode_frame(request_header(65, 0), 2, req, 0)) == hex(want_req));
  decode_body<DescribeTransactionsRequest>(want_req, 11, 0);

  auto want_resp = load_vector("describe_transactions_v0_response.hex");
  DescribeTransactionsResponse resp;
  resp.transaction_states.emplace_back().topics.emplace_back().partitions.push_back(0);
  CHECK(hex(encode_frame(response_header(), 1, resp, 0)) == hex(want_resp));
  decode_body<DescribeTransactionsResponse>(want_resp, 5, 0);
}

TEST_CASE("ApiVersions v3 request and response (response header v0) match their vectors") {
  auto want_req = load_vector("api_versions_v3_request.hex");
  ApiVersionsRequest req;
  req.client_software_name = "kproxy";
  req.client_software_version = "0.1.0";
  CHECK(hex(encode_frame(request_header(18, 3, 1, "kproxy"), 2, req, 3)) == hex(want_req));
  auto back = decode_body<ApiVersionsRequest>(want_req, 17, 3);
  CHECK(back.client_software_name == "kproxy");
  CHECK(back.client_software_version == "0.1.0");

  auto want_resp = load_vector("api_versions_v3_response.hex");
  ApiVersionsResponse resp;
  auto& key = resp.api_keys.emplace_back();
  key.api_key = 18;
  key.max_version = 4;
  resp.finalized_features_epoch = 5;
  CHECK(response_header_version(18, 3) == 0);
  CHECK(hex(encode_frame(response_header(1), 0, resp, 3)) == hex(want_resp));
  auto back_resp = decode_body<ApiVersionsResponse>(want_resp, 4, 3);
  CHECK(back_resp.finalized_features_epoch == 5);
  CHECK(back_resp.api_keys.at(0).api_key == 18);
  CHECK(back_resp.unknown_tagged_fields.empty());
}

TEST_CASE("Every API x version x direction survives encode -> decode -> encode byte for byte") {
  const uint64_t seed = base_seed();
  constexpr int kRandomPerVersion = 12;
  std::cout << "[codec round trip] seed=0x" << std::hex << seed << std::dec << " (set KPROXY_CODEC_SEED to replay), " << kRandomPerVersion
            << " random instances per version\n";
  int pairs = 0;
  int instances = 0;
  for (int16_t key : all_api_keys()) {
    for (bool request : {true, false}) {
      const VersionRange range = request ? request_versions(key) : response_versions(key);
      for (int v = range.min; v <= range.max; ++v) {
        const auto version = static_cast<int16_t>(v);
        ++pairs;
        for (int i = -1; i < kRandomPerVersion; ++i) {
          const uint64_t s = seed ^ (static_cast<uint64_t>(key) << 40) ^ (static_cast<uint64_t>(version) << 24) ^
                             (request ? 1ull << 56 : 0) ^ static_cast<uint64_t>(i + 1);
          testing::Filler f = i < 0 ? testing::Filler() : testing::Filler(s);
          std::unique_ptr<Message> m = testing::make_instance(key, request, version, f);
          REQUIRE(m != nullptr);
          INFO(m->name(), " v", version, (i < 0 ? " smallest" : " random seed=" + std::to_string(s)));
          const auto first = encode(*m, version);
          CHECK(m->size(version) == first.size());
          CHECK(m->unsupported_field(version) == nullptr);
          std::unique_ptr<Message> back = request ? make_request(key) : make_response(key);
          Reader r(first);
          back->read(r, version);
          INFO(r.error());
          REQUIRE(r.ok());
          CHECK(r.at_end());
          const auto second = encode(*back, version);
          if (first != second) {
            CHECK(hex(first) == hex(second));
          }
          CHECK(back->size(version) == second.size());
          nlohmann::json j;
          back->to_json(j, version);
          CHECK(j.is_object());
          back->for_each_error_code(version, [](int16_t& code, const ErrorScope&) { (void)code; });
          back->for_each_entity(version, [](EntityKind, std::string_view, int64_t) {});
          ++instances;
        }
      }
    }
  }
  std::cout << "[codec round trip] " << pairs << " API x version x direction pairs, " << instances << " instances\n";
  CHECK(pairs > 400);
}

TEST_CASE("Request and response header messages round-trip at every version") {
  for (int16_t version : {1, 2}) {
    for (int i = 0; i < 20; ++i) {
      testing::Filler f(static_cast<uint64_t>(i));
      RequestHeaderData h;
      testing::fill(f, h, version);
      std::vector<uint8_t> a;
      Writer wa(a);
      h.write(wa, version);
      CHECK(h.size(version) == a.size());
      RequestHeaderData back;
      Reader r(a);
      back.read(r, version);
      REQUIRE(r.ok());
      std::vector<uint8_t> b;
      Writer wb(b);
      back.write(wb, version);
      CHECK(a == b);
    }
  }
  // ClientId stays a classic (int16-length) nullable string in header v2.
  RequestHeaderData h = request_header(18, 3, 7, std::nullopt);
  std::vector<uint8_t> out;
  Writer w(out);
  h.write(w, 2);
  CHECK(hex(out) == "0012000300000007ffff00");
}

TEST_CASE("Every seed vector truncated at every offset fails cleanly, naming message, field and offset") {
  struct Case {
    const char* file;
    size_t header;
    int16_t key;
    bool request;
    int16_t version;
    const char* name;
  };
  const Case cases[] = {
      {"add_partitions_to_txn_v5_request.hex", 11, 24, true, 5, "AddPartitionsToTxnRequest v5"},
      {"add_partitions_to_txn_v5_response.hex", 5, 24, false, 5, "AddPartitionsToTxnResponse v5"},
      {"write_txn_markers_v1_request.hex", 11, 27, true, 1, "WriteTxnMarkersRequest v1"},
      {"write_txn_markers_v1_response.hex", 5, 27, false, 1, "WriteTxnMarkersResponse v1"},
      {"describe_transactions_v0_request.hex", 11, 65, true, 0, "DescribeTransactionsRequest v0"},
      {"describe_transactions_v0_response.hex", 5, 65, false, 0, "DescribeTransactionsResponse v0"},
      {"api_versions_v3_request.hex", 17, 18, true, 3, "ApiVersionsRequest v3"},
      {"api_versions_v3_response.hex", 4, 18, false, 3, "ApiVersionsResponse v3"},
  };
  for (const auto& c : cases) {
    const auto frame = load_vector(c.file);
    const Bytes body = Bytes(frame).subspan(4 + c.header);
    for (size_t cut = 0; cut < body.size(); ++cut) {
      std::unique_ptr<Message> m = c.request ? make_request(c.key) : make_response(c.key);
      Reader r(body.first(cut));
      m->read(r, c.version);
      INFO(c.file, " cut at ", cut, ": ", r.error());
      CHECK_FALSE(r.ok());
      CHECK(r.error().rfind(c.name, 0) == 0);
      CHECK(r.error().find(": field ") != std::string::npos);
      CHECK(r.error().find(" at offset ") != std::string::npos);
    }
  }
}

TEST_CASE("Malformed lengths, counts and varints are rejected") {
  auto decode = [](Message& m, int16_t version, std::vector<uint8_t> body) {
    Reader r(body);
    m.read(r, version);
    return r.error();
  };
  SUBCASE("negative classic string length (null, as Kafka reads it, in a non-nullable field)") {
    FindCoordinatorRequest m;
    CHECK(decode(m, 0, {0xff, 0xfe}) ==
          "FindCoordinatorRequest v0: field Key at offset 2: null in a non-nullable field (string length -2)");
  }
  SUBCASE("string length past the end") {
    FindCoordinatorRequest m;
    CHECK(decode(m, 0, {0x00, 0x05, 'a'}).find("field Key at offset 2: string length 5 exceeds the 1 bytes left") != std::string::npos);
  }
  SUBCASE("null in a non-nullable compact string") {
    DescribeTransactionsRequest m;
    CHECK(decode(m, 0, {0x02, 0x00, 0x00}).find("null in a non-nullable field") != std::string::npos);
  }
  SUBCASE("negative array count (null, as Kafka reads it)") {
    MetadataRequest m;
    CHECK(decode(m, 0, {0xff, 0xff, 0xff, 0xfe}).find("field Topics at offset 4: null array in a non-nullable field") != std::string::npos);
  }
  SUBCASE("null array where the version does not allow it") {
    MetadataRequest m;
    CHECK(decode(m, 0, {0xff, 0xff, 0xff, 0xff}).find("null array in a non-nullable field") != std::string::npos);
    MetadataRequest ok;
    CHECK(decode(ok, 1, {0xff, 0xff, 0xff, 0xff}).empty());
    CHECK_FALSE(ok.topics.has_value());
  }
  SUBCASE("array count larger than the bytes left") {
    DescribeTransactionsRequest m;
    CHECK(decode(m, 0, {0x7f, 0x00}).find("array count 126 exceeds") != std::string::npos);
  }
  SUBCASE("varint longer than five bytes") {
    DescribeTransactionsRequest m;
    CHECK(decode(m, 0, {0xff, 0xff, 0xff, 0xff, 0xff, 0x01}).find("varint longer than 5 bytes") != std::string::npos);
  }
  SUBCASE("tagged field size past the end") {
    DescribeTransactionsRequest m;
    CHECK(decode(m, 0, {0x01, 0x01, 0x05, 0x10, 0x00}).find("field _tagged_fields") != std::string::npos);
  }
  SUBCASE("known tagged field whose payload is longer than its value") {
    ApiVersionsResponse m;  // tag 1 (FinalizedFeaturesEpoch, int64) declared with 9 bytes
    std::vector<uint8_t> body{0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x09, 0, 0, 0, 0, 0, 0, 0, 5, 0};
    CHECK(decode(m, 3, body).find("field FinalizedFeaturesEpoch") != std::string::npos);
  }
}

TEST_CASE("Unknown tagged fields are kept and written back in tag order, interleaved with known ones") {
  // ApiVersionsResponse v3: known tags 0..3. Unknown tags 4 and 9, known tag 1 (FinalizedFeaturesEpoch).
  std::vector<uint8_t> body{0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,           // error, no api keys, throttle
                            0x03,                                               // three tagged fields
                            0x01, 0x08, 0,    0,    0,    0,    0,    0, 0, 9,  // tag 1 = 9
                            0x04, 0x02, 0xab, 0xcd,                             // tag 4, unknown
                            0x09, 0x00};                                        // tag 9, unknown, empty
  ApiVersionsResponse m;
  Reader r(body);
  m.read(r, 3);
  REQUIRE(r.ok());
  CHECK(m.finalized_features_epoch == 9);
  REQUIRE(m.unknown_tagged_fields.size() == 2);
  CHECK(m.unknown_tagged_fields[0].tag == 4);
  CHECK(encode(m, 3) == body);
  CHECK(m.size(3) == body.size());

  // A tag below every known one goes first.
  m.unknown_tagged_fields.insert(m.unknown_tagged_fields.begin(), UnknownTaggedField{0, {}});
  m.supported_features.clear();
  auto out = encode(m, 3);
  CHECK(hex(out).find("04"
                      "0000"
                      "0108") != std::string::npos);  // count 4, tag 0 (empty), then tag 1
}

TEST_CASE("Tagged fields equal to their default are omitted; a known tag outside its versions stays unknown") {
  ApiVersionsResponse m;
  m.finalized_features_epoch = -1;  // the default
  CHECK(hex(encode(m, 3)) ==
        "00000100000000"
        "00");
  // ProduceResponse NodeEndpoints is tag 0 from v10; at v9 (flexible) tag 0 is unknown and kept.
  ProduceResponse p;
  p.unknown_tagged_fields.push_back({0, {}});
  const auto bytes = encode(p, 9);
  ProduceResponse back;
  Reader r(bytes);
  back.read(r, 9);
  REQUIRE(r.ok());
  CHECK(back.unknown_tagged_fields.size() == 1);
  CHECK(back.node_endpoints.empty());
  CHECK(encode(back, 9) == bytes);
}

TEST_CASE("Fields absent at a version keep their defaults and are not written") {
  MetadataResponse m;
  m.cluster_id = "c";      // v2+
  m.throttle_time_ms = 5;  // v3+
  auto& b = m.brokers.emplace_back();
  b.node_id = 1;
  b.host = "h";
  b.port = 9092;
  b.rack = "r";  // v1+
  const auto v0 = encode(m, 0);
  CHECK(hex(v0) ==
        "00000001"
        "00000001"
        "0001"
        "68"
        "00002384"
        "00000000");
  MetadataResponse back;
  Reader r(v0);
  back.read(r, 0);
  REQUIRE(r.ok());
  CHECK_FALSE(back.cluster_id.has_value());
  CHECK(back.brokers.at(0).host == "h");
  CHECK(back.brokers.at(0).port == 9092);
  CHECK_FALSE(back.brokers.at(0).rack.has_value());
}

TEST_CASE("for_each_error_code visits every error code with its topic, partition and transaction") {
  AddPartitionsToTxnResponse resp;
  resp.error_code = 0;
  auto& txn = resp.results_by_transaction.emplace_back();
  txn.transactional_id = "orders-1";
  auto& topic = txn.topic_results.emplace_back();
  topic.name = "payments";
  auto& part = topic.results_by_partition.emplace_back();
  part.partition_index = 3;
  part.partition_error_code = 0;
  std::vector<std::string> seen;
  resp.for_each_error_code(5, [&](int16_t& code, const ErrorScope& s) {
    std::string d(s.field);
    if (s.topic) d += " topic=" + std::string(*s.topic);
    if (s.partition) d += " partition=" + std::to_string(*s.partition);
    if (s.transactional_id) d += " txn=" + std::string(*s.transactional_id);
    d += " depth=" + std::to_string(s.depth);
    seen.push_back(d);
    if (s.field == "PartitionErrorCode") code = 90;  // PRODUCER_FENCED
  });
  CHECK(seen == std::vector<std::string>{"ErrorCode depth=0", "PartitionErrorCode topic=payments partition=3 txn=orders-1 depth=3"});
  CHECK(part.partition_error_code == 90);
  // v3 has no top-level ErrorCode: it is not visited.
  int count = 0;
  resp.for_each_error_code(3, [&](int16_t&, const ErrorScope&) { ++count; });
  CHECK(count == 0);
}

TEST_CASE("for_each_entity visits transactional ids, producer ids, topics and partitions") {
  AddPartitionsToTxnRequest req;
  auto& txn = req.transactions.emplace_back();
  txn.transactional_id = "orders-1";
  txn.producer_id = 42;
  auto& topic = txn.topics.emplace_back();
  topic.name = "payments";
  topic.partitions = {0, 5};
  std::vector<std::string> seen;
  req.for_each_entity(5, [&](EntityKind k, std::string_view text, int64_t n) {
    seen.push_back(std::to_string(static_cast<int>(k)) + ":" + std::string(text) + ":" + std::to_string(n));
  });
  CHECK(seen == std::vector<std::string>{"1:orders-1:0", "2::42", "0:payments:0", "4::0", "4::5"});
  seen.clear();
  req.v3_and_below_transactional_id = "old";
  req.for_each_entity(3, [&](EntityKind k, std::string_view text, int64_t) {
    seen.push_back(std::to_string(static_cast<int>(k)) + ":" + std::string(text));
  });
  CHECK(seen == std::vector<std::string>{"1:old", "2:"});
}

TEST_CASE("to_json names fields as Kafka does and renders bytes, uuids and records") {
  FetchResponse resp;
  auto& topic = resp.responses.emplace_back();
  topic.topic_id[15] = 1;
  auto& part = topic.partitions.emplace_back();
  const uint8_t batch[3] = {1, 2, 3};
  part.records = Bytes(batch, 3);
  nlohmann::json j;
  resp.to_json(j, 16);
  CHECK(j["Responses"][0]["TopicId"] == "AAAAAAAAAAAAAAAAAAAAAQ");
  CHECK(j["Responses"][0]["Partitions"][0]["Records"]["bytes"] == 3);
  CHECK(j.contains("NodeEndpoints"));
  CHECK_FALSE(j["Responses"][0].contains("Topic"));  // v0-12 only
}

TEST_CASE("Broker addresses are reachable under natural names") {
  MetadataResponse md;
  auto& b = md.brokers.emplace_back();
  b.node_id = 1;
  b.host = "broker-1";
  b.port = 9092;
  FindCoordinatorResponse fc;
  fc.host = "h";
  fc.coordinators.emplace_back().port = 1;
  DescribeClusterResponse dc;
  dc.brokers.emplace_back().broker_id = 1;
  ProduceResponse pr;
  pr.node_endpoints.emplace_back().host = "h";
  FetchResponse fr;
  fr.node_endpoints.emplace_back().port = 1;
  ShareFetchResponse sf;
  sf.node_endpoints.emplace_back().host = "h";
  ShareAcknowledgeResponse sa;
  sa.node_endpoints.emplace_back().host = "h";
  ApiVersionsRequest av;
  av.client_software_name = "librdkafka";
  CHECK(md.brokers[0].port == 9092);
}

TEST_CASE("The generated smallest instance of each seed API encodes to the seed vector's body") {
  struct Case {
    const char* file;
    size_t header;
    int16_t key;
    bool request;
    int16_t version;
  };
  const Case cases[] = {
      {"add_partitions_to_txn_v5_request.hex", 11, 24, true, 5}, {"add_partitions_to_txn_v5_response.hex", 5, 24, false, 5},
      {"write_txn_markers_v1_request.hex", 11, 27, true, 1},     {"write_txn_markers_v1_response.hex", 5, 27, false, 1},
      {"describe_transactions_v0_request.hex", 11, 65, true, 0}, {"describe_transactions_v0_response.hex", 5, 65, false, 0},
  };
  for (const auto& c : cases) {
    const auto frame = load_vector(c.file);
    const std::vector<uint8_t> body(frame.begin() + static_cast<std::ptrdiff_t>(4 + c.header), frame.end());
    testing::Filler f;
    auto m = testing::make_instance(c.key, c.request, c.version, f);
    INFO(c.file);
    CHECK(hex(encode(*m, c.version)) == hex(body));
  }
}

TEST_CASE("unsupported_field reports what Java would refuse to write at a version") {
  AddPartitionsToTxnRequest req;
  CHECK(req.unsupported_field(3) == nullptr);
  req.transactions.emplace_back();
  CHECK(std::string(req.unsupported_field(3)) == "Transactions");
  CHECK(req.unsupported_field(5) == nullptr);
  // AddPartitionsToTxnResponse.ErrorCode is ignorable: a non-default value is simply dropped below v4.
  AddPartitionsToTxnResponse resp;
  resp.error_code = 3;
  CHECK(resp.unsupported_field(3) == nullptr);
  // A null where the version does not allow it (Metadata Topics is nullable from v1).
  MetadataRequest md;
  md.topics = std::nullopt;
  CHECK(std::string(md.unsupported_field(0)) == "Topics");
  CHECK(md.unsupported_field(1) == nullptr);
  // MetadataRequestTopic.TopicId (v10+) is ignorable; AllowAutoTopicCreation (v4+, default true) is not.
  auto name = [](const char* p) { return std::string(p != nullptr ? p : "(none)"); };
  MetadataRequest md2;
  md2.topics.emplace().emplace_back().topic_id[0] = 1;
  CHECK(name(md2.unsupported_field(9)) == "(none)");
  md2.allow_auto_topic_creation = false;
  CHECK(name(md2.unsupported_field(3)) == "AllowAutoTopicCreation");
  // Nested: FetchPartition.LastFetchedEpoch exists from v12.
  FetchRequest fetch;
  fetch.topics.emplace_back().partitions.emplace_back().last_fetched_epoch = 3;
  CHECK(name(fetch.unsupported_field(11)) == "FetchPartition.LastFetchedEpoch");
  CHECK(name(fetch.unsupported_field(12)) == "(none)");
}
