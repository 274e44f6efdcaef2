#include "proxy/net/proxy_header.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using kproxy::net::ProxyHeaderReader;
using State = ProxyHeaderReader::State;

namespace {

const std::vector<uint8_t> kSignature = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

/// A v2 header: version/command byte, family/transport byte, then `body` (addresses and TLVs).
std::vector<uint8_t> header(uint8_t ver_cmd, uint8_t fam, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> out = kSignature;
  out.push_back(ver_cmd);
  out.push_back(fam);
  out.push_back(static_cast<uint8_t>(body.size() >> 8));
  out.push_back(static_cast<uint8_t>(body.size()));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

std::vector<uint8_t> tlv(uint8_t type, const std::string& value) {
  std::vector<uint8_t> out = {type, static_cast<uint8_t>(value.size() >> 8), static_cast<uint8_t>(value.size())};
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

// 192.0.2.10:51000 -> 10.0.0.5:9092
const std::vector<uint8_t> kTcp4 = {192, 0, 2, 10, 10, 0, 0, 5, 0xC7, 0x38, 0x23, 0x84};

}  // namespace

TEST_CASE("a TCP4 header with an authority TLV, then the connection's own bytes") {
  auto body = kTcp4;
  auto authority = tlv(0x02, "broker-1.kafka.example.com");
  auto other = tlv(0xEA, "vpce-0123");  // a vendor TLV: skipped
  body.insert(body.end(), other.begin(), other.end());
  body.insert(body.end(), authority.begin(), authority.end());
  auto bytes = header(0x21, 0x11, body);
  std::vector<uint8_t> kafka = {0, 0, 0, 10, 0, 18};
  bytes.insert(bytes.end(), kafka.begin(), kafka.end());
  ProxyHeaderReader reader;
  CHECK(reader.feed(bytes) == State::kDone);
  CHECK_FALSE(reader.header().local);
  CHECK(reader.header().source == "192.0.2.10:51000");
  CHECK(reader.header().destination == "10.0.0.5:9092");
  CHECK(reader.header().authority == "broker-1.kafka.example.com");
  CHECK(std::vector<uint8_t>(reader.rest().begin(), reader.rest().end()) == kafka);
}

TEST_CASE("byte by byte, TCP6, and LOCAL") {
  std::vector<uint8_t> v6(36, 0);
  v6[15] = 1;                    // source ::1
  v6[16] = 0x20, v6[17] = 0x01;  // destination 2001::
  v6[32] = 0x30, v6[33] = 0x39;  // 12345
  v6[34] = 0x23, v6[35] = 0x84;  // 9092
  auto bytes = header(0x21, 0x21, v6);
  ProxyHeaderReader reader;
  for (size_t i = 0; i + 1 < bytes.size(); ++i) REQUIRE(reader.feed(kproxy::codec::Bytes(&bytes[i], 1)) == State::kNeedMore);
  CHECK(reader.feed(kproxy::codec::Bytes(&bytes.back(), 1)) == State::kDone);
  CHECK(reader.header().source == "[::1]:12345");
  CHECK(reader.header().destination == "[2001::]:9092");
  CHECK(reader.rest().empty());

  ProxyHeaderReader health;
  CHECK(health.feed(header(0x20, 0x00, {})) == State::kDone);  // a load balancer's own health check
  CHECK(health.header().local);
  CHECK(health.header().source.empty());
}

TEST_CASE("refusals, each with its reason and label") {
  auto refused = [](const std::vector<uint8_t>& bytes, const char* label) {
    ProxyHeaderReader reader(64);
    CHECK(reader.feed(bytes) == State::kRefused);
    CHECK(std::string(reader.refusal_label()) == label);
    CHECK_FALSE(reader.reason().empty());
    return reader.reason();
  };
  CHECK(refused({0, 0, 0, 10, 0, 18}, "no_signature").find("connecting directly") != std::string::npos);
  std::string v1 = "PROXY TCP4 192.0.2.10 10.0.0.5 51000 9092\r\n";
  CHECK(refused(std::vector<uint8_t>(v1.begin(), v1.end()), "version_1").find("version 1") != std::string::npos);
  refused(header(0x31, 0x11, kTcp4), "bad_version");
  refused(header(0x2F, 0x11, kTcp4), "bad_command");
  refused(header(0x21, 0x12, kTcp4), "bad_family");  // UDP
  refused(header(0x21, 0x11, {1, 2, 3}), "malformed");
  auto truncated_tlv = kTcp4;
  truncated_tlv.insert(truncated_tlv.end(), {0x02, 0x00, 0x09, 'a'});
  refused(header(0x21, 0x11, truncated_tlv), "malformed");
  refused(header(0x21, 0x11, std::vector<uint8_t>(100, 0)), "too_large");  // over the reader's 64-byte cap
  // A signature still arriving is not refused yet, nor is the start of "PROXY ".
  ProxyHeaderReader partial;
  CHECK(partial.feed(kproxy::codec::Bytes(kSignature.data(), 5)) == State::kNeedMore);
  ProxyHeaderReader text;
  CHECK(text.feed(kproxy::codec::Bytes(reinterpret_cast<const uint8_t*>("PRO"), 3)) == State::kNeedMore);
}
