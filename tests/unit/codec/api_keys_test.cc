#include "codec/generated/api_keys.h"

#include <doctest/doctest.h>

#include <string_view>

using namespace kproxy::codec;

TEST_CASE("API names and keys map both ways") {
  CHECK(std::string_view(api_name(0)) == "Produce");
  CHECK(std::string_view(api_name(18)) == "ApiVersions");
  CHECK(std::string_view(api_name(24)) == "AddPartitionsToTxn");
  CHECK(api_name(-1) == nullptr);
  CHECK(api_name(9999) == nullptr);
  CHECK(api_key_for_name("Metadata") == 3);
  CHECK(api_key_for_name("DescribeTransactions") == 65);
  CHECK_FALSE(api_key_for_name("NoSuchApi").has_value());
  CHECK(static_cast<int16_t>(ApiKey::kFindCoordinator) == 10);
  for (int16_t key : all_api_keys()) CHECK(api_key_for_name(api_name(key)) == key);
}

TEST_CASE("Header versions follow flexible versions, with ApiVersions responses always on v0") {
  CHECK(request_header_version(18, 0) == 1);
  CHECK(request_header_version(18, 3) == 2);
  CHECK(response_header_version(18, 0) == 0);
  CHECK(response_header_version(18, 3) == 0);  // KIP-511
  CHECK(response_header_version(18, 4) == 0);
  CHECK(request_header_version(3, 8) == 1);  // Metadata v9 is the first flexible version
  CHECK(request_header_version(3, 9) == 2);
  CHECK(response_header_version(3, 8) == 0);
  CHECK(response_header_version(3, 9) == 1);
  CHECK(request_header_version(24, 5) == 2);
  CHECK(response_header_version(24, 5) == 1);
  CHECK(request_header_version(27, 0) == -1);  // WriteTxnMarkers v0 was removed in Kafka 4.0
  CHECK(request_header_version(27, 1) == 2);
  CHECK(request_header_version(9999, 0) == -1);
  CHECK(response_header_version(3, 9999) == -1);
}

TEST_CASE("Version ranges and flexibility come from the schema") {
  CHECK(request_versions(18).min == 0);
  CHECK(request_versions(18).max >= 4);
  CHECK(is_valid_version(65, 0));
  CHECK_FALSE(is_valid_version(65, -1));
  CHECK(first_flexible_version(18) == 3);
  CHECK(first_flexible_version(65) == 0);
  CHECK(request_versions(7).empty());  // ControlledShutdown: removed, still named
  CHECK(std::string_view(api_name(7)) == "ControlledShutdown");
  CHECK_FALSE(is_valid_version(7, 0));
  CHECK(response_versions(0).min == request_versions(0).min);
}
