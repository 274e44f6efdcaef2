#include "codec/response_header.h"

#include <doctest/doctest.h>

#include <vector>

using namespace kproxy::codec;

TEST_CASE("ResponseHeader v1 reads the correlation id and keeps unknown tagged fields") {
  std::vector<uint8_t> frame{0x00, 0x00, 0x01, 0x00, 0x01, 0x05, 0x02, 0xab, 0xcd, 0x99};
  ResponseHeader h;
  REQUIRE(read_response_header(frame, 1, h, nullptr));
  CHECK(h.correlation_id == 256);
  REQUIRE(h.tagged_fields.size() == 1);
  CHECK(h.tagged_fields[0].tag == 5);
  CHECK(h.tagged_fields[0].data.size() == 2);
  CHECK(h.size == 9);
  CHECK(peek_response_correlation_id(frame) == 256);
  std::vector<uint8_t> out;
  Writer w(out);
  write_response_header(w, h);
  CHECK(out == std::vector<uint8_t>(frame.begin(), frame.begin() + 9));
  CHECK(response_header_size(h) == 9);
}

TEST_CASE("ResponseHeader v0 is the correlation id alone") {
  std::vector<uint8_t> frame{0x7f, 0xff, 0xff, 0xff, 0x00};
  ResponseHeader h;
  REQUIRE(read_response_header(frame, 0, h, nullptr));
  CHECK(h.correlation_id == INT32_MAX);
  CHECK(h.size == 4);
}

TEST_CASE("ResponseHeader refuses a tagged field that runs past the frame") {
  std::vector<uint8_t> frame{0x00, 0x00, 0x00, 0x01, 0x01, 0x05, 0x09, 0xab};
  ResponseHeader h;
  std::string error;
  CHECK_FALSE(read_response_header(frame, 1, h, &error));
  CHECK(error.find("ResponseHeader") != std::string::npos);
}
