#include "proxy/tap/record_contents.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/proxy/tap/record_batch_builder.h"

using namespace kproxy;
using tap::testing::append_v2_batch;
using tap::testing::TestRecord;

namespace {
nlohmann::json contents(const std::vector<uint8_t>& b, tap::RecordContentLimits limits = {}) {
  return tap::record_contents(codec::Bytes(b.data(), b.size()), limits);
}
}  // namespace

TEST_CASE("record contents: keys, values, headers, offsets and timestamps of a v2 batch") {
  std::vector<uint8_t> b;
  append_v2_batch(b, 100, {{"k1", "hello", {{"trace", "abc"}, {"empty", std::nullopt}}}, {std::nullopt, "v2", {}}});
  auto j = contents(b);
  CHECK(j["bytes"] == b.size());
  CHECK(j["batches"] == 1);
  CHECK(j["records"] == 2);
  const auto& batch = j["batch_list"][0];
  CHECK(batch["base_offset"] == 100);
  CHECK(batch["magic"] == 2);
  CHECK(batch["compression"] == "none");
  CHECK(batch["producer_id"] == 4000);
  CHECK(batch["transactional"] == false);
  const auto& r0 = batch["records"][0];
  CHECK(r0["offset"] == 100);
  CHECK(r0["timestamp"] == 1700000000000);
  CHECK(r0["key"]["text"] == "k1");
  CHECK(r0["value"]["text"] == "hello");
  CHECK(r0["value"]["size"] == 5);
  CHECK_FALSE(r0["value"].contains("truncated"));
  CHECK(r0["headers"][0]["key"] == "trace");
  CHECK(r0["headers"][0]["value"]["text"] == "abc");
  CHECK(r0["headers"][1]["value"].is_null());
  const auto& r1 = batch["records"][1];
  CHECK(r1["offset"] == 101);
  CHECK(r1["timestamp"] == 1700000000010);
  CHECK(r1["key"].is_null());
  CHECK_FALSE(r1.contains("headers"));
  CHECK_FALSE(j.contains("records_not_shown"));
}

TEST_CASE("record contents: binary as base64, long values cut at max_record_bytes, UTF-8 never split") {
  std::string binary("\x00\x01\xff\xfe", 4);
  std::string long_text(1000, 'x');
  std::string utf8 = "\xc3\xa9\xc3\xa9\xc3\xa9";  // "ééé": 6 bytes
  std::vector<uint8_t> b;
  append_v2_batch(b, 0, {{binary, long_text, {}}, {"k", utf8, {}}});
  auto j = contents(b, {5, 100});
  const auto& r0 = j["batch_list"][0]["records"][0];
  CHECK(r0["key"]["base64"] == "AAH//g==");
  CHECK(r0["value"]["text"] == "xxxxx");
  CHECK(r0["value"]["size"] == 1000);
  CHECK(r0["value"]["truncated"] == true);
  const auto& r1 = j["batch_list"][0]["records"][1];
  CHECK(r1["value"]["text"] == "\xc3\xa9\xc3\xa9");  // 4 of 6 bytes: the 3rd character would be split
  CHECK(r1["value"]["truncated"] == true);
}

TEST_CASE("record contents: max_records bounds what is shown; the rest is counted") {
  std::vector<uint8_t> b;
  append_v2_batch(b, 0, {{"a", "1", {}}, {"b", "2", {}}});
  append_v2_batch(b, 2, {{"c", "3", {}}, {"d", "4", {}}});
  auto j = contents(b, {256, 3});
  CHECK(j["batches"] == 2);
  CHECK(j["records"] == 4);
  CHECK(j["batch_list"][0]["records"].size() == 2);
  CHECK(j["batch_list"][1]["records"].size() == 1);
  CHECK(j["records_not_shown"] == 1);
}

TEST_CASE("record contents: control markers, compressed batches, partial batches, old formats") {
  std::vector<uint8_t> b;
  std::string commit_key("\x00\x00\x00\x01", 4);                                                 // version 0, type 1 = COMMIT
  append_v2_batch(b, 10, {{commit_key, std::string("\x00\x00\x00\x00\x00\x00", 6), {}}}, 0x30);  // transactional + control
  auto j = contents(b);
  CHECK(j["batch_list"][0]["control"] == true);
  CHECK(j["batch_list"][0]["transactional"] == true);
  CHECK(j["batch_list"][0]["records"][0]["control"] == "COMMIT");

  std::vector<uint8_t> gz;
  append_v2_batch(gz, 0, {{"a", "1", {}}, {"b", "2", {}}}, 1);  // gzip attribute (body not really compressed)
  auto z = contents(gz);
  CHECK(z["batch_list"][0]["compression"] == "gzip");
  CHECK(z["batch_list"][0]["contents"] == "compressed: records not shown");
  CHECK(z["records_not_shown"] == 2);

  std::vector<uint8_t> cut = b;
  append_v2_batch(cut, 11, {{"k", "v", {}}});
  cut.resize(cut.size() - 3);
  auto p = contents(cut);
  CHECK(p["batches"] == 1);
  CHECK(p["batch_list"][1]["partial"] == true);

  std::vector<uint8_t> v1(12 + 10, 0);
  v1[11] = 10;     // length 10
  v1[12 + 4] = 1;  // magic 1
  auto old = contents(v1);
  CHECK(old["batch_list"][0]["magic"] == 1);
  CHECK(old["batch_list"][0]["contents"] == "message format v0/v1: not shown");
}

TEST_CASE("record contents: corrupt record lengths stop the batch with an error, never read past it") {
  std::vector<uint8_t> b;
  append_v2_batch(b, 0, {{"key", "value", {}}});
  // The record's length varint is the first byte after the 61-byte batch header: claim 60 bytes.
  b[61] = 120;  // zigzag(60)
  auto j = contents(b);
  CHECK(j["batch_list"][0].contains("error"));
  CHECK(tap::record_contents({}, {})["batches"] == 0);
  for (size_t cut = 0; cut < b.size(); ++cut) {
    auto part = tap::record_contents(codec::Bytes(b.data(), cut), {});  // must not crash or throw
    CHECK(part["bytes"] == cut);
  }
}
