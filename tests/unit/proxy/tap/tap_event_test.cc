#include "proxy/tap/tap_event.h"

#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

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
