#include "proxy/tap/tap_event.h"

#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/generated/messages/produce.h"
#include "codec/generated/messages/sasl_authenticate.h"
#include "tests/unit/proxy/tap/record_batch_builder.h"
#include "tests/unit/support/frames.h"

using namespace kproxy::tap;

namespace {

/// A v2 record batch header with `records` records and `payload` bytes after the 61-byte header.
void append_batch(std::vector<uint8_t>& out, uint32_t records, size_t payload) {
  size_t start = out.size();
  out.resize(start + 61 + payload, 0);
  uint32_t length = static_cast<uint32_t>(61 + payload - 12);
  for (int i = 0; i < 4; ++i) out[start + 8 + i] = static_cast<uint8_t>(length >> (24 - 8 * i));
  out[start + 16] = 2;  // magic
  for (int i = 0; i < 4; ++i) out[start + 57 + i] = static_cast<uint8_t>(records >> (24 - 8 * i));
}

}  // namespace

TEST_CASE("tap: record sets are summarised as batch and record counts") {
  std::vector<uint8_t> records;
  append_batch(records, 3, 40);
  append_batch(records, 5, 10);
  RecordSummary s = summarise_records(kproxy::codec::Bytes(records.data(), records.size()));
  CHECK(s.bytes == records.size());
  CHECK(s.batches == 2);
  CHECK(s.records == 8);
  // A fetch may end in a partial batch: it is not counted.
  records.resize(records.size() - 5);
  s = summarise_records(kproxy::codec::Bytes(records.data(), records.size()));
  CHECK(s.batches == 1);
  CHECK(s.records == 3);
  CHECK(summarise_records({}).batches == 0);
}

TEST_CASE("tap: SASL payloads and other secrets are redacted at any depth") {
  auto body = nlohmann::json::parse(R"({"AuthBytes":"c2VjcmV0","Tokens":[{"Hmac":"AAAA","TokenId":"t"}],"Name":"x"})");
  redact_secrets(body);
  CHECK(body["AuthBytes"].get<std::string>().rfind("<redacted", 0) == 0);
  CHECK(body["Tokens"][0]["Hmac"].get<std::string>().rfind("<redacted", 0) == 0);
  CHECK(body["Tokens"][0]["TokenId"] == "t");
  CHECK(body["Name"] == "x");
  CHECK(body.dump().find("c2VjcmV0") == std::string::npos);
}

TEST_CASE("tap: record contents only when tap.records is on; SASL stays redacted either way") {
  using namespace kproxy;
  std::vector<uint8_t> records;
  kproxy::tap::testing::append_v2_batch(records, 0, {{"order-1", "{\"amount\":12}", {{"source", "web"}}}});
  codec::ProduceRequest produce;
  produce.acks = -1;
  auto& partition = produce.topic_data.emplace_back().partition_data.emplace_back();
  produce.topic_data[0].name = "orders";
  partition.records = codec::Bytes(records.data(), records.size());
  codec::RequestHeader h;
  auto frame = kproxy::testing::encoded_request_frame(produce, 12, 77, "tap-test", h);
  stage::ConnectionInfo info{1, "kafka", 0, nullptr, {}};
  stage::RequestContext ctx(h, frame, info);

  TapLimits off;
  auto line = nlohmann::json::parse(request_line(ctx, off));
  auto summary = line["body"]["TopicData"][0]["PartitionData"][0]["Records"];
  CHECK(summary["records"] == 1);
  CHECK(summary["batches"] == 1);
  CHECK_FALSE(summary.contains("batch_list"));
  CHECK(line.dump().find("order-1") == std::string::npos);

  TapLimits on;
  on.records = true;
  on.max_record_bytes = 8;
  line = nlohmann::json::parse(request_line(ctx, on));
  auto shown = line["body"]["TopicData"][0]["PartitionData"][0]["Records"];
  CHECK(shown["records"] == 1);
  const auto& record = shown["batch_list"][0]["records"][0];
  CHECK(record["key"]["text"] == "order-1");
  CHECK(record["value"]["text"] == "{\"amount");
  CHECK(record["value"]["truncated"] == true);
  CHECK(record["headers"][0]["value"]["text"] == "web");

  codec::SaslAuthenticateRequest sasl;
  std::string secret = "\0user\0hunter2";
  sasl.auth_bytes = codec::Bytes(reinterpret_cast<const uint8_t*>(secret.data()), secret.size());
  codec::RequestHeader sh;
  auto sasl_frame = kproxy::testing::encoded_request_frame(sasl, 2, 77, "tap-test", sh);
  stage::RequestContext sasl_ctx(sh, sasl_frame, info);
  std::string sasl_line = request_line(sasl_ctx, on);
  CHECK(nlohmann::json::parse(sasl_line)["body"]["AuthBytes"].get<std::string>().rfind("<redacted", 0) == 0);
  CHECK(sasl_line.find("aHVudGVyMg") == std::string::npos);  // no base64 fragment of the password
}
