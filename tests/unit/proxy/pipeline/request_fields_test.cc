#include "proxy/pipeline/request_fields.h"

#include <doctest/doctest.h>

#include <vector>

#include "codec/writer.h"

using namespace kproxy;

TEST_CASE("Produce acks at every body layout") {
  std::vector<uint8_t> body;
  codec::Writer w(body);
  // v0-2: Acks first.
  w.int16(0);
  CHECK(proxy::produce_request_acks(body, 2) == 0);
  // v3-8: classic nullable TransactionalId, then Acks.
  body.clear();
  w.nullable_string(std::string_view("txn-1"), false);
  w.int16(-1);
  CHECK(proxy::produce_request_acks(body, 8) == -1);
  body.clear();
  w.nullable_string(std::nullopt, false);
  w.int16(0);
  CHECK(proxy::produce_request_acks(body, 3) == 0);
  // v9+: compact.
  body.clear();
  w.nullable_string(std::string_view("txn-2"), true);
  w.int16(1);
  CHECK(proxy::produce_request_acks(body, 12) == 1);
  body.clear();
  w.nullable_string(std::nullopt, true);
  w.int16(0);
  CHECK(proxy::produce_request_acks(body, 9) == 0);
  // Too short.
  body.resize(1);
  CHECK_FALSE(proxy::produce_request_acks(body, 9).has_value());
  body.clear();
  CHECK_FALSE(proxy::produce_request_acks(body, 3).has_value());
}

TEST_CASE("SaslHandshake mechanism") {
  std::vector<uint8_t> body;
  codec::Writer w(body);
  w.string("SCRAM-SHA-256", false);
  CHECK(proxy::sasl_handshake_mechanism(body) == "SCRAM-SHA-256");
  body.resize(3);
  CHECK_FALSE(proxy::sasl_handshake_mechanism(body).has_value());
}
