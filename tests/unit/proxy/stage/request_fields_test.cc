#include "proxy/stage/request_fields.h"

#include <doctest/doctest.h>

#include <vector>

#include "codec/writer.h"

using namespace kproxy;

TEST_CASE("Produce acks at every body layout") {
  std::vector<uint8_t> body;
  codec::Writer w(body);
  // v0-2: Acks first.
  w.int16(0);
  CHECK(stage::produce_request_acks(body, 2) == 0);
  // v3-8: classic nullable TransactionalId, then Acks.
  body.clear();
  w.nullable_string(std::string_view("txn-1"), false);
  w.int16(-1);
  CHECK(stage::produce_request_acks(body, 8) == -1);
  body.clear();
  w.nullable_string(std::nullopt, false);
  w.int16(0);
  CHECK(stage::produce_request_acks(body, 3) == 0);
  // v9+: compact.
  body.clear();
  w.nullable_string(std::string_view("txn-2"), true);
  w.int16(1);
  CHECK(stage::produce_request_acks(body, 12) == 1);
  body.clear();
  w.nullable_string(std::nullopt, true);
  w.int16(0);
  CHECK(stage::produce_request_acks(body, 9) == 0);
  // Too short.
  body.resize(1);
  CHECK_FALSE(stage::produce_request_acks(body, 9).has_value());
  body.clear();
  CHECK_FALSE(stage::produce_request_acks(body, 3).has_value());
}

TEST_CASE("SaslHandshake mechanism") {
  std::vector<uint8_t> body;
  codec::Writer w(body);
  w.string("SCRAM-SHA-256", false);
  CHECK(stage::sasl_handshake_mechanism(body) == "SCRAM-SHA-256");
  body.resize(3);
  CHECK_FALSE(stage::sasl_handshake_mechanism(body).has_value());
}

TEST_CASE("Produce acks: the version decides the layout, the same bytes read differently at v2, v3 and v9") {
  std::vector<uint8_t> body;
  codec::Writer w(body);
  // A v3-8 body: null classic TransactionalId (int16 -1), then Acks 1.
  w.nullable_string(std::nullopt, false);
  w.int16(1);
  CHECK(stage::produce_request_acks(body, 3) == 1);
  CHECK(stage::produce_request_acks(body, 2) == -1);  // v0-2 have no TransactionalId: the first int16 is Acks
  // A v9+ body: null compact TransactionalId (one byte 0), then Acks -1.
  body.clear();
  w.nullable_string(std::nullopt, true);
  w.int16(-1);
  CHECK(stage::produce_request_acks(body, 9) == -1);
  CHECK(kproxy::stage::kProduceFirstFlexibleVersion == 9);
  // Read at v8 the first two bytes are a classic string length 0x00FF: longer than the body.
  CHECK_FALSE(stage::produce_request_acks(body, 8).has_value());
}

TEST_CASE("Produce acks: a TransactionalId that takes the whole body leaves no Acks; trailing fields are not needed") {
  std::vector<uint8_t> body;
  codec::Writer w(body);
  w.nullable_string(std::string_view("txn-3"), false);
  CHECK_FALSE(stage::produce_request_acks(body, 5).has_value());  // the Acks is missing
  w.int16(0);
  w.int32(30000);  // TimeoutMs and the topic data follow: not read
  w.int32(1);
  CHECK(stage::produce_request_acks(body, 5) == 0);
  // A length past the body (a string of 300 bytes announced, 5 present).
  body.clear();
  w.int16(300);
  w.raw(codec::Bytes(reinterpret_cast<const uint8_t*>("abcde"), 5));
  CHECK_FALSE(stage::produce_request_acks(body, 4).has_value());
}

TEST_CASE("SaslHandshake mechanism: a view into the body; empty is a mechanism, null is not") {
  std::vector<uint8_t> body;
  codec::Writer w(body);
  w.string("PLAIN", false);
  auto mechanism = stage::sasl_handshake_mechanism(body);
  REQUIRE(mechanism.has_value());
  CHECK(*mechanism == "PLAIN");
  CHECK(reinterpret_cast<const uint8_t*>(mechanism->data()) == body.data() + 2);  // no copy
  body.clear();
  w.string("", false);
  CHECK(stage::sasl_handshake_mechanism(body) == std::string_view());
  body.clear();
  w.int16(-1);  // a null string: the field is not nullable
  CHECK_FALSE(stage::sasl_handshake_mechanism(body).has_value());
  body.clear();
  CHECK_FALSE(stage::sasl_handshake_mechanism(body).has_value());
}
