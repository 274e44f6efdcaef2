#include "proxy/metrics/response_errors.h"

#include <algorithm>
#include <vector>

#include <doctest/doctest.h>

#include "codec/message.h"
#include "codec/testing/fill.h"
#include "codec/testing/filler.h"
#include "codec/writer.h"

using namespace kproxy;

TEST_CASE("response errors: the Produce scanner finds what the codec finds, every version") {
  for (int16_t version = 3; version <= 13; ++version) {
    for (uint64_t seed = 1; seed <= 200; ++seed) {
      codec::testing::Filler filler(seed * 131 + static_cast<uint64_t>(version));
      auto message = codec::testing::make_instance(0, false, version, filler);
      REQUIRE(message);
      std::vector<int16_t> expected;
      message->for_each_error_code(version, [&](int16_t& code, const codec::ErrorScope&) {
        if (code != 0) expected.push_back(code);
      });
      std::vector<uint8_t> out;
      codec::Writer w(out);
      message->write(w, version);
      metrics::ScannedErrors found;
      bool ok = metrics::scan_produce_response_errors(codec::Bytes(out.data(), out.size()), version, found);
      if (expected.size() > metrics::kMaxScannedErrors) {
        CHECK_FALSE(ok);
        continue;
      }
      INFO("version ", version, " seed ", seed);
      REQUIRE(ok);
      CHECK(std::vector<int16_t>(found.codes.begin(), found.codes.begin() + static_cast<long>(found.count)) == expected);
    }
  }
}

TEST_CASE("response errors: truncated bodies are refused") {
  codec::testing::Filler filler(7);
  auto message = codec::testing::make_instance(0, false, 11, filler);
  std::vector<uint8_t> out;
  codec::Writer w(out);
  message->write(w, 11);
  metrics::ScannedErrors found;
  for (size_t cut = 0; cut < out.size(); ++cut) {
    CHECK_FALSE(metrics::scan_produce_response_errors(codec::Bytes(out.data(), cut), 11, found));
  }
  CHECK(metrics::scan_produce_response_errors(codec::Bytes(out.data(), out.size()), 11, found));
  CHECK_FALSE(metrics::scan_produce_response_errors(codec::Bytes(out.data(), out.size()), 2, found));
}
