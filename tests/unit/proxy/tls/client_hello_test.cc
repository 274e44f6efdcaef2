#include "proxy/tls/client_hello.h"

#include <openssl/ssl.h>

#include <doctest/doctest.h>

#include "tests/unit/support/client_hello.h"

#include <string>
#include <vector>

using namespace kproxy::tls;
using State = ClientHelloReader::State;

using kproxy::testing::client_hello;

namespace {

/// The bytes of a real ClientHello: an OpenSSL client session (TLS 1.2 or 1.3 as `max_version`
/// allows) started into a memory BIO. `server_name` empty: no SNI. (It fits one record: OpenSSL's
size_t record_count(const std::vector<uint8_t>& bytes) {
  size_t n = 0;
  for (size_t at = 0; at + 5 <= bytes.size(); at += 5 + (static_cast<size_t>(bytes[at + 3]) << 8 | bytes[at + 4])) ++n;
  return n;
}

}  // namespace

TEST_CASE("the server name of a real TLS 1.3 and TLS 1.2 ClientHello, normalised") {
  for (int version : {TLS1_3_VERSION, TLS1_2_VERSION}) {
    auto hello = client_hello("Broker-1.Kafka.Example.COM", version);
    ClientHelloReader reader;
    CHECK(reader.feed(hello) == State::kDone);
    CHECK(reader.hello().raw_server_name == "Broker-1.Kafka.Example.COM");
    REQUIRE(reader.server_name().has_value());
    CHECK(*reader.server_name() == "broker-1.kafka.example.com");
    CHECK(reader.bytes() == hello);  // all of it kept, for the TLS session to read
  }
}

TEST_CASE("no SNI: done, without a name") {
  auto hello = client_hello("");
  ClientHelloReader reader;
  CHECK(reader.feed(hello) == State::kDone);
  CHECK_FALSE(reader.hello().has_server_name);
  CHECK_FALSE(reader.server_name().has_value());
}

TEST_CASE("a ClientHello in 1-byte pieces") {
  auto hello = client_hello("kafka.example.com");
  ClientHelloReader reader;
  for (size_t i = 0; i + 1 < hello.size(); ++i) REQUIRE(reader.feed(kproxy::codec::Bytes(&hello[i], 1)) == State::kNeedMore);
  CHECK(reader.feed(kproxy::codec::Bytes(&hello.back(), 1)) == State::kDone);
  CHECK(*reader.server_name() == "kafka.example.com");
}

TEST_CASE("the same hello cut into records of 100 bytes by hand") {
  auto hello = client_hello("split.example.com");
  // Take the one record's payload (the handshake message) and re-frame it in 100-byte records.
  std::vector<uint8_t> payload(hello.begin() + 5, hello.end());
  std::vector<uint8_t> records;
  for (size_t at = 0; at < payload.size(); at += 100) {
    size_t n = std::min<size_t>(100, payload.size() - at);
    records.insert(records.end(), {22, 3, 1, static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)});
    records.insert(records.end(), payload.begin() + static_cast<std::ptrdiff_t>(at), payload.begin() + static_cast<std::ptrdiff_t>(at + n));
  }
  CHECK(record_count(records) > 2);
  ClientHelloReader reader;
  CHECK(reader.feed(records) == State::kDone);
  CHECK(*reader.server_name() == "split.example.com");
}

TEST_CASE("refusals: not TLS, over the cap, malformed") {
  SUBCASE("a plaintext Kafka request") {
    std::vector<uint8_t> kafka = {0, 0, 0, 20, 0, 18, 0, 3};
    ClientHelloReader reader;
    CHECK(reader.feed(kafka) == State::kNotTls);
    CHECK(reader.error() == "the first byte is 0, not a TLS handshake record (22)");
  }
  SUBCASE("over the cap") {
    auto hello = client_hello("kafka.example.com");
    ClientHelloReader reader(64);
    CHECK(reader.feed(hello) == State::kTooLarge);
    CHECK(reader.error() == "no whole ClientHello within the first 64 bytes");
    CHECK(reader.bytes().size() == 64);             // never holds more than the cap
    CHECK(reader.feed(hello) == State::kTooLarge);  // later bytes change nothing
  }
  SUBCASE("a record over 2^14 bytes") {
    std::vector<uint8_t> big = {22, 3, 3, 0x40, 0x01};
    ClientHelloReader reader;
    CHECK(reader.feed(big) == State::kMalformed);
  }
  SUBCASE("another handshake message first") {
    std::vector<uint8_t> server_hello = {22, 3, 3, 0, 4, 2, 0, 0, 0};
    ClientHelloReader reader;
    CHECK(reader.feed(server_hello) == State::kMalformed);
    CHECK(reader.error() == "the first handshake message is of type 2, not a ClientHello");
  }
  SUBCASE("an alert record after the first") {
    auto hello = client_hello("kafka.example.com");
    std::vector<uint8_t> first(hello.begin(), hello.begin() + 5 + 10);
    first[3] = 0;
    first[4] = 10;
    first.insert(first.end(), {21, 3, 3, 0, 2, 2, 40});
    ClientHelloReader reader;
    CHECK(reader.feed(first) == State::kMalformed);
  }
  SUBCASE("lengths inside the hello that do not add up") {
    auto hello = client_hello("kafka.example.com");
    hello[5 + 4 + 34] = 200;  // session id length past the message
    ClientHelloReader reader;
    CHECK(reader.feed(hello) == State::kMalformed);
    CHECK(reader.error() == "ClientHello: bad session id");
  }
}

TEST_CASE("normalize_server_name and is_ip_literal") {
  CHECK(normalize_server_name("Kafka.Example.com.") == "kafka.example.com");
  CHECK(normalize_server_name("broker_1.internal") == "broker_1.internal");
  CHECK_FALSE(normalize_server_name(""));
  CHECK_FALSE(normalize_server_name("."));
  CHECK_FALSE(normalize_server_name("a..b"));
  CHECK_FALSE(normalize_server_name("kafka.example.com.."));  // an empty last label
  CHECK_FALSE(normalize_server_name(".."));
  CHECK_FALSE(normalize_server_name("bad name.example.com"));
  CHECK_FALSE(normalize_server_name("caf\xc3\xa9.example.com"));
  CHECK_FALSE(normalize_server_name(std::string(64, 'a') + ".com"));
  CHECK(normalize_server_name(std::string(63, 'a') + ".com"));
  CHECK_FALSE(normalize_server_name(std::string(254, 'a')));
  CHECK(is_ip_literal("10.0.0.1"));
  CHECK(is_ip_literal("::1"));
  CHECK(is_ip_literal("[2001:db8::1]"));
  CHECK_FALSE(is_ip_literal("broker-1.kafka.example.com"));
  CHECK_FALSE(is_ip_literal("10.0.0"));
}

TEST_CASE("what follows the hello is not judged, however the bytes arrive (found by fuzz_client_hello)") {
  auto stream = client_hello("kafka.example.com");
  stream.insert(stream.end(), {21, 3, 3, 0, 2, 2, 40});  // an alert after the hello: the TLS session's business
  ClientHelloReader whole;
  CHECK(whole.feed(stream) == State::kDone);
  CHECK(whole.bytes() == stream);  // kept, for the TLS session to read
  ClientHelloReader pieces;
  for (uint8_t b : stream) pieces.feed(kproxy::codec::Bytes(&b, 1));
  CHECK(pieces.state() == State::kDone);
  CHECK(*pieces.server_name() == *whole.server_name());
}
