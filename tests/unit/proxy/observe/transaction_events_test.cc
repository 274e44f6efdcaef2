// What the transaction tracker is told about frames: which requests are part of a transaction,
// their fields, the records of a batch, and the response's error, producer id and injecting rule.
#include "proxy/observe/transaction_events.h"

#include <deque>

#include <doctest/doctest.h>

#include "codec/frame_reader.h"
#include "codec/generated/error_code.h"
#include "codec/generated/messages/add_partitions_to_txn.h"
#include "codec/generated/messages/end_txn.h"
#include "codec/generated/messages/init_producer_id.h"
#include "codec/generated/messages/metadata.h"
#include "codec/generated/messages/produce.h"
#include "codec/message_support.h"
#include "codec/writer.h"

#include <nlohmann/json.hpp>
#include "proxy/chaos/fault_rule.h"
#include "tests/unit/support/frames.h"
#include "tests/unit/support/record_batch.h"

using namespace kproxy;
using namespace kproxy::observe;
using kproxy::testing::batch;
using kproxy::testing::encoded_request_frame;
using kproxy::testing::encoded_response_frame;

namespace {

/// The frames the requests were read from: a TxnRequest's strings are views into its frame.
std::deque<std::vector<uint8_t>> frames;

template <class M>
std::optional<TxnRequest> request_of(const M& body, int16_t version, stage::ConnectionInfo& conn) {
  codec::RequestHeader header;
  auto& frame = frames.emplace_back(encoded_request_frame(body, version, 11, "txn-app", header));
  stage::RequestContext ctx(header, frame, conn);
  TxnRequest r;
  if (!txn_request(ctx, r)) return std::nullopt;
  return r;
}

}  // namespace

TEST_CASE("transaction events: a response frame's correlation id") {
  std::vector<uint8_t> frame = {0, 0, 0, 8, 0, 0, 1, 2, 0, 0};
  CHECK(response_correlation_id(codec::Bytes(frame.data(), frame.size())) == 258);
  CHECK(!response_correlation_id(codec::Bytes(frame.data(), 6)));
}

TEST_CASE("transaction events: which requests are part of a transaction, and their fields") {
  stage::ConnectionInfo conn{3, "kafka", 0, nullptr, {}};
  CHECK(txn_api(static_cast<int16_t>(codec::ApiKey::kEndTxn)) == TxnApi::kEndTxn);
  CHECK(!txn_api(static_cast<int16_t>(codec::ApiKey::kFetch)));

  codec::EndTxnRequest end;
  end.transactional_id = "orders";
  end.producer_id = 5;
  end.producer_epoch = 1;
  end.committed = true;
  auto r = request_of(end, 3, conn);
  REQUIRE(r);
  CHECK(r->api == TxnApi::kEndTxn);
  CHECK(r->transactional_id == "orders");
  CHECK(r->producer_id == 5);
  CHECK(r->commit);
  CHECK(r->listener == "kafka");
  CHECK(r->client_id == "txn-app");

  codec::InitProducerIdRequest idempotent;
  idempotent.transactional_id = std::nullopt;  // an idempotent producer: no transaction
  CHECK(!request_of(idempotent, 4, conn));
  codec::InitProducerIdRequest init;
  init.transactional_id = "orders";
  init.transaction_timeout_ms = 30000;
  r = request_of(init, 4, conn);
  REQUIRE(r);
  CHECK(r->transaction_timeout_ms == 30000);

  codec::AddPartitionsToTxnRequest add;
  add.v3_and_below_transactional_id = "orders";
  add.v3_and_below_producer_id = 5;
  auto& topic = add.v3_and_below_topics.emplace_back();
  topic.name = "out";
  topic.partitions = {0, 2};
  r = request_of(add, 3, conn);
  REQUIRE(r);
  CHECK(r->partitions == std::vector<PartitionRef>{{"out", 0}, {"out", 2}});
  codec::AddPartitionsToTxnRequest verify;  // v4+: a broker's verification adds nothing
  auto& x = verify.transactions.emplace_back();
  x.transactional_id = "orders";
  x.verify_only = true;
  CHECK(!request_of(verify, 5, conn));

  auto records = batch(5, 77, 2);
  codec::ProduceRequest produce;
  produce.acks = -1;
  auto& data = produce.topic_data.emplace_back();
  data.name = "out";
  auto& part = data.partition_data.emplace_back();
  part.index = 1;
  part.records = codec::Bytes(records.data(), records.size());
  CHECK(!request_of(produce, 9, conn));  // no TransactionalId: not decoded, not tracked
  produce.transactional_id = "orders";
  r = request_of(produce, 9, conn);
  REQUIRE(r);
  CHECK(r->api == TxnApi::kProduce);
  CHECK(r->records == 5);
  CHECK(r->bytes == records.size());
  CHECK(r->producer_id == 77);
  CHECK(r->producer_epoch == 2);
  CHECK(r->partitions == std::vector<PartitionRef>{{"out", 1}});
}

TEST_CASE("transaction events: a transactional Produce read without decoding, every version, tagged fields and cut bodies") {
  stage::ConnectionInfo conn{3, "kafka", 0, nullptr, {}};
  auto first = batch(4, 91, 7);
  auto second = batch(6, 91, 7);
  static const uint8_t extra[] = {1, 2, 3};
  for (int16_t v = 3; v <= 13; ++v) {
    CAPTURE(v);
    codec::ProduceRequest produce;
    produce.transactional_id = "payments";
    produce.acks = -1;
    produce.timeout_ms = 30000;
    std::vector<PartitionRef> want;  // by name, or by topic id from v13 (KIP-516)
    for (int t = 0; t < 2; ++t) {
      auto& data = produce.topic_data.emplace_back();
      data.name = t == 0 ? "orders-with-a-long-topic-name" : "audit";
      data.topic_id = codec::Uuid{static_cast<uint8_t>(t + 1)};
      for (int32_t p = 0; p < 3; ++p) {
        auto& part = data.partition_data.emplace_back();
        part.index = p * 10 + t;
        if (p == 0) part.records = codec::Bytes(first.data(), first.size());
        if (p == 1) part.records = codec::Bytes(second.data(), second.size());
        // p == 2: null records
        if (v >= 9) part.unknown_tagged_fields.push_back({7, codec::Bytes(extra, sizeof extra)});
        want.push_back(v >= 13 ? PartitionRef{{}, part.index, data.topic_id} : PartitionRef{data.name, part.index});
      }
      if (v >= 9) data.unknown_tagged_fields.push_back({9, codec::Bytes(extra, sizeof extra)});
    }
    if (v >= 9) produce.unknown_tagged_fields.push_back({11, codec::Bytes(extra, 1)});
    auto r = request_of(produce, v, conn);
    REQUIRE(r);
    CHECK(r->transactional_id == "payments");
    CHECK(r->partitions == want);
    CHECK(r->records == 2 * (4 + 6));
    CHECK(r->bytes == 2 * (first.size() + second.size()));
    CHECK(r->producer_id == 91);
    CHECK(r->producer_epoch == 7);
    CHECK(r->client_id == "txn-app");

    // Every cut of the body: read or refused, never past its end (ASan watches).
    auto& whole = frames.back();
    codec::RequestHeader header;
    REQUIRE(codec::read_request_header(codec::Bytes(whole.data() + codec::kFrameSizePrefix, whole.size() - codec::kFrameSizePrefix), header,
                                       nullptr));
    const size_t body_at = codec::kFrameSizePrefix + header.size;
    size_t refused = 0;
    for (size_t cut = body_at; cut < whole.size(); ++cut) {
      std::vector<uint8_t> shorter(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut));
      codec::RequestHeader h = header;
      stage::RequestContext ctx(h, shorter, conn);
      TxnRequest scratch;
      if (!txn_request(ctx, scratch)) ++refused;
    }
    CHECK(refused == whole.size() - body_at);
  }
}

TEST_CASE("transaction events: a response's first error, its producer id and the rule that injected it") {
  stage::ConnectionInfo conn{3, "kafka", 0, nullptr, {}};
  codec::InitProducerIdResponse init;
  init.producer_id = 42;
  init.producer_epoch = 3;
  auto frame = encoded_response_frame(init, 4);
  stage::ResponseContext a(22, 4, codec::response_header_version(22, 4), frame, conn);
  TxnResponse r = txn_response(a);
  CHECK(r.error_code == 0);
  CHECK(r.producer_id == 42);
  CHECK(r.producer_epoch == 3);
  CHECK(r.injected_by.empty());

  codec::EndTxnResponse busy;
  busy.error_code = static_cast<int16_t>(codec::ErrorCode::kConcurrentTransactions);
  frame = encoded_response_frame(busy, 3);
  stage::ExchangeActions actions;
  actions.injected_by = "busy-endtxn";  // what the fault stage writes for an error rule
  stage::ResponseContext b(26, 3, codec::response_header_version(26, 3), frame, conn, actions, false, std::chrono::nanoseconds(0));
  r = txn_response(b);
  CHECK(r.error_code == busy.error_code);
  CHECK(r.injected_by == "busy-endtxn");

  stage::ExchangeActions none;
  stage::ResponseContext c(26, 3, codec::response_header_version(26, 3), frame, conn, none, true, std::chrono::nanoseconds(0));
  CHECK(txn_response(c).injected_by == "kproxy");  // an answer no rule built
  stage::ExchangeActions answered;
  answered.injected_by = "busy-answer";
  stage::ResponseContext d(26, 3, codec::response_header_version(26, 3), frame, conn, answered, true, std::chrono::nanoseconds(0));
  CHECK(txn_response(d).injected_by == "busy-answer");  // a rule's answer names the rule
}

TEST_CASE("transaction events: a lifecycle event as a tap line") {
  TransactionRecord t;
  t.transactional_id = "orders";
  t.producer_id = 7;
  t.producer_epoch = 1;
  t.records = 10;
  t.outcome = TxnOutcome::kAborted;
  t.begin = TxnClock::time_point{} + std::chrono::seconds(10);
  t.end = t.begin + std::chrono::milliseconds(25);
  t.cause = TxnError{TxnApi::kProduce, static_cast<int16_t>(codec::ErrorCode::kTransactionAbortable), "abortable", t.begin};
  auto line = nlohmann::json::parse(transaction_event_line(TxnEvent{TxnEvent::Kind::kEnd, t, 3, TxnApi::kEndTxn, {}, {}, nullptr}, t.end));
  CHECK(line["transaction"] == "end");
  CHECK(line["transactional_id"] == "orders");
  CHECK(line["api"] == "EndTxn");
  CHECK(line["outcome"] == "aborted");
  CHECK(line["duration_ms"] == doctest::Approx(25.0));
  CHECK(line["cause"]["error"] == "TRANSACTION_ABORTABLE");
  CHECK(line["cause"]["injected_by"] == "abortable");
  CHECK(line["ts"].get<std::string>().back() == 'Z');

  TxnError e{TxnApi::kEndTxn, static_cast<int16_t>(codec::ErrorCode::kConcurrentTransactions), "", t.begin};
  line = nlohmann::json::parse(transaction_event_line(TxnEvent{TxnEvent::Kind::kError, t, 0, TxnApi::kEndTxn, {}, {}, &e}, t.end));
  CHECK(line["transaction"] == "error");
  CHECK(line["error"] == "CONCURRENT_TRANSACTIONS");
  CHECK(line["injected_by"].is_null());  // the broker's
  CHECK(line["api"].is_null());          // connection 0: ended by time, not by a frame
  CHECK(txn_api_key(TxnApi::kEndTxn) == 26);
}

TEST_CASE("transaction events: the inline API key check names exactly the APIs txn_api knows") {
  for (int k = -1; k < 100; ++k) {
    auto key = static_cast<int16_t>(k);
    CHECK(observe::is_txn_api_key(key) == observe::txn_api(key).has_value());
  }
}
