#include "codec/request_header.h"

#include <doctest/doctest.h>

#include <vector>

using namespace kproxy::codec;

TEST_CASE("RequestHeader v2 keeps the client id as a classic int16-length string") {
  // Given the AddPartitionsToTxn v5 request header from the seed vector (header v2)
  std::vector<uint8_t> frame{0x00, 0x18, 0x00, 0x05, 0x00, 0x00, 0x00, 0x07, 0x00, 0x02, 'c', 'l', 0x00, 0xaa};
  RequestHeader h;
  std::string error;
  // When it is parsed
  REQUIRE(read_request_header(frame, h, &error));
  // Then every field is where the wire format puts it
  CHECK(h.api_key == 24);
  CHECK(h.api_version == 5);
  CHECK(h.correlation_id == 7);
  CHECK(h.header_version == 2);
  REQUIRE(h.client_id.has_value());
  CHECK(*h.client_id == "cl");
  CHECK(h.size == 13);
  // And it writes back byte for byte
  std::vector<uint8_t> out;
  Writer w(out);
  write_request_header(w, h);
  CHECK(out == std::vector<uint8_t>(frame.begin(), frame.begin() + 13));
  CHECK(request_header_size(h) == 13);
}

TEST_CASE("RequestHeader v1 for a non-flexible version, with a null client id") {
  std::vector<uint8_t> frame{0x00, 0x03, 0x00, 0x01, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff};
  RequestHeader h;
  REQUIRE(read_request_header(frame, h, nullptr));
  CHECK(h.api_key == 3);
  CHECK(h.header_version == 1);
  CHECK(h.correlation_id == -2);
  CHECK_FALSE(h.client_id.has_value());
  CHECK(h.size == 10);
}

TEST_CASE("RequestHeader of an unknown API key is parsed as far as it can be and kept") {
  // A vendor API key above 10000 (docs/protocol.md "Request and response headers": passed through)
  std::vector<uint8_t> frame{0x27, 0x1a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x01, 'x', 0x01, 0x02};
  RequestHeader h;
  REQUIRE(read_request_header(frame, h, nullptr));
  CHECK(h.api_key == 10010);
  CHECK(h.header_version == -1);
  CHECK(h.correlation_id == 42);
  REQUIRE(h.client_id.has_value());
  CHECK(*h.client_id == "x");
}

TEST_CASE("RequestHeader shorter than its fixed part is refused with a reason") {
  std::vector<uint8_t> frame{0x00, 0x03, 0x00};
  RequestHeader h;
  std::string error;
  CHECK_FALSE(read_request_header(frame, h, &error));
  CHECK(error.find("RequestHeader") != std::string::npos);
  CHECK(error.find("RequestApiVersion") != std::string::npos);
}

TEST_CASE("RequestHeader refuses a client id that runs past the frame") {
  std::vector<uint8_t> frame{0x00, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x09, 'a'};
  RequestHeader h;
  std::string error;
  CHECK_FALSE(read_request_header(frame, h, &error));
  CHECK(error.find("ClientId") != std::string::npos);
}
