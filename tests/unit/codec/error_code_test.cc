#include "codec/generated/error_code.h"

#include <doctest/doctest.h>

#include <string_view>

using namespace kproxy::codec;

TEST_CASE("Error codes carry Kafka's names") {
  CHECK(std::string_view(error_name(0)) == "NONE");
  CHECK(std::string_view(error_name(-1)) == "UNKNOWN_SERVER_ERROR");
  CHECK(std::string_view(error_name(16)) == "NOT_COORDINATOR");
  CHECK(std::string_view(error_name(35)) == "UNSUPPORTED_VERSION");
  CHECK(std::string_view(error_name(90)) == "PRODUCER_FENCED");
  CHECK(error_name(-2) == nullptr);
  CHECK(error_name(30000) == nullptr);
  CHECK(error_code_for_name("TRANSACTION_ABORTABLE") == static_cast<int16_t>(ErrorCode::kTransactionAbortable));
  CHECK(error_code_for_name("INVALID_REQUEST") == 42);
  CHECK_FALSE(error_code_for_name("not_coordinator").has_value());
  CHECK(static_cast<int16_t>(ErrorCode::kNotCoordinator) == 16);
  CHECK(all_error_codes().size() > 130);
  for (int16_t code : all_error_codes()) CHECK(error_code_for_name(error_name(code)) == code);
}
