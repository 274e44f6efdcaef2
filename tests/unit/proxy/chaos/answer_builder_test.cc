#include "proxy/chaos/answer_builder.h"
#include "codec/response_header.h"

#include <doctest/doctest.h>

#include "../../codec/test_vectors.h"
#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/request_header.h"

using namespace kproxy;

namespace {
// Decodes a request vector, answers it with `code`, returns the whole response frame.
std::vector<uint8_t> answer_vector(const std::string& request_vector, int16_t code) {
  auto frame = codec::test::load_vector(request_vector);
  codec::Bytes message(frame.data() + 4, frame.size() - 4);
  codec::RequestHeader h;
  std::string error;
  REQUIRE(codec::read_request_header(message, h, &error));
  auto req = codec::make_request(h.api_key);
  codec::Reader r(message.subspan(h.size));
  req->read(r, h.api_version);
  REQUIRE(r.ok());
  auto resp = chaos::build_answer(*req, h.api_version, code);
  REQUIRE(resp);
  return codec::encode_response_frame(h.correlation_id, codec::response_header_version(h.api_key, h.api_version), *resp, h.api_version);
}

void put16(std::vector<uint8_t>& v, size_t at, int16_t code) {
  v[at] = static_cast<uint8_t>(static_cast<uint16_t>(code) >> 8);
  v[at + 1] = static_cast<uint8_t>(code & 0xff);
}
}  // namespace

TEST_CASE("answer to the AddPartitionsToTxn v5 seed: the seed response's layout, code per partition") {
  auto got = answer_vector("add_partitions_to_txn_v5_request.hex", 51);
  auto want = codec::test::load_vector("add_partitions_to_txn_v5_response.hex");
  // size(4) header(4+1) throttle(4) error(2) results(1) txn id(1) topics(1) name(1) partitions(1) index(4) → partition error at 24
  put16(want, 24, 51);
  CHECK(got == want);
}

TEST_CASE("answer to the WriteTxnMarkers v1 seed: the seed response's layout, code per partition") {
  auto got = answer_vector("write_txn_markers_v1_request.hex", 7);
  auto want = codec::test::load_vector("write_txn_markers_v1_response.hex");
  // size(4) header(5) markers(1) producer id(8) topics(1) name(1) partitions(1) index(4) → error at 25
  put16(want, 25, 7);
  CHECK(got == want);
}

TEST_CASE("answer to the DescribeTransactions v0 seed: one state per id with the code, no topics") {
  auto got = answer_vector("describe_transactions_v0_request.hex", 105);
  auto want = codec::test::load_vector("describe_transactions_v0_response.hex");
  // The seed's state carries one topic; an error answer has none (as TransactionCoordinator's
  // describe error path): take the seed layout, set the code, drop the topic entry.
  put16(want, 14, 105);
  // states(1) error(2) id(1) state(1) timeout(4) start(8) pid(8) epoch(2) → topics array at 40
  size_t topics_at = 40;
  want.erase(want.begin() + static_cast<long>(topics_at), want.begin() + static_cast<long>(topics_at + 8));  // 02 01 02 00000000 00
  want.insert(want.begin() + static_cast<long>(topics_at), 0x01);                                            // empty compact array
  uint32_t size = static_cast<uint32_t>(want.size() - 4);
  want[0] = static_cast<uint8_t>(size >> 24);
  want[1] = static_cast<uint8_t>(size >> 16);
  want[2] = static_cast<uint8_t>(size >> 8);
  want[3] = static_cast<uint8_t>(size);
  CHECK(got == want);
}

TEST_CASE("answers for the transaction APIs mirror the request") {
  SUBCASE("InitProducerId") {
    codec::InitProducerIdRequest q;
    auto r = chaos::build_answer(q, 5, 51);
    auto& resp = dynamic_cast<codec::InitProducerIdResponse&>(*r);
    CHECK(resp.error_code == 51);
    CHECK(resp.producer_id == -1);
  }
  SUBCASE("AddPartitionsToTxn v3 per topic") {
    codec::AddPartitionsToTxnRequest q;
    codec::AddPartitionsToTxnRequest::AddPartitionsToTxnTopic t;
    t.name = "orders";
    t.partitions = {0, 2};
    q.v3_and_below_topics.push_back(t);
    auto r = chaos::build_answer(q, 3, 16);
    auto& resp = dynamic_cast<codec::AddPartitionsToTxnResponse&>(*r);
    REQUIRE(resp.results_by_topic_v3_and_below.size() == 1);
    CHECK(resp.results_by_topic_v3_and_below[0].name == "orders");
    REQUIRE(resp.results_by_topic_v3_and_below[0].results_by_partition.size() == 2);
    CHECK(resp.results_by_topic_v3_and_below[0].results_by_partition[1].partition_index == 2);
    CHECK(resp.results_by_topic_v3_and_below[0].results_by_partition[1].partition_error_code == 16);
  }
  SUBCASE("TxnOffsetCommit, FindCoordinator v4, Produce, EndTxn, AddOffsetsToTxn, ListTransactions") {
    codec::TxnOffsetCommitRequest toc;
    toc.topics.emplace_back();
    toc.topics[0].name = "in";
    toc.topics[0].partitions.emplace_back();
    toc.topics[0].partitions[0].partition_index = 3;
    auto r1 = chaos::build_answer(toc, 3, 25);
    CHECK(dynamic_cast<codec::TxnOffsetCommitResponse&>(*r1).topics[0].partitions[0].error_code == 25);
    codec::FindCoordinatorRequest fc;
    fc.coordinator_keys = {"a", "b"};
    auto r2 = chaos::build_answer(fc, 4, 15);
    auto& fcr = dynamic_cast<codec::FindCoordinatorResponse&>(*r2);
    REQUIRE(fcr.coordinators.size() == 2);
    CHECK(fcr.coordinators[1].key == "b");
    CHECK(fcr.coordinators[1].error_code == 15);
    auto r2b = chaos::build_answer(fc, 3, 15);
    CHECK(dynamic_cast<codec::FindCoordinatorResponse&>(*r2b).error_code == 15);
    codec::ProduceRequest p;
    p.topic_data.emplace_back();
    p.topic_data[0].name = "out";
    p.topic_data[0].partition_data.emplace_back();
    p.topic_data[0].partition_data[0].index = 1;
    auto r3 = chaos::build_answer(p, 11, 19);
    CHECK(dynamic_cast<codec::ProduceResponse&>(*r3).responses[0].partition_responses[0].error_code == 19);
    CHECK(dynamic_cast<codec::EndTxnResponse&>(*chaos::build_answer(codec::EndTxnRequest{}, 5, 51)).error_code == 51);
    CHECK(dynamic_cast<codec::AddOffsetsToTxnResponse&>(*chaos::build_answer(codec::AddOffsetsToTxnRequest{}, 4, 14)).error_code == 14);
    CHECK(dynamic_cast<codec::ListTransactionsResponse&>(*chaos::build_answer(codec::ListTransactionsRequest{}, 1, 15)).error_code == 15);
  }
  SUBCASE("generic: an API with a top-level ErrorCode; refused without one") {
    CHECK(chaos::answer_refusal(36, 2).empty());   // SaslAuthenticate has a top-level ErrorCode
    CHECK(!chaos::answer_refusal(3, 12).empty());  // Metadata has none
  }
}

TEST_CASE("set_throttle_time") {
  codec::EndTxnResponse r;
  CHECK(chaos::set_throttle_time(r, 5, 1234));
  CHECK(r.throttle_time_ms == 1234);
  // The generated accessor knows the versions: ApiVersions has ThrottleTimeMs from v1 only.
  codec::ApiVersionsResponse av;
  CHECK(!chaos::set_throttle_time(av, 0, 99));
  CHECK(av.throttle_time_ms == 0);
  CHECK(chaos::set_throttle_time(av, 1, 99));
  CHECK(av.throttle_time_ms == 99);
  codec::EndTxnRequest request;  // requests have none
  CHECK(request.throttle_time(5) == nullptr);
}
