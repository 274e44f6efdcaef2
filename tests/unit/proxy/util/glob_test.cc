#include "proxy/util/glob.h"

#include <string>

#include <doctest/doctest.h>

using kproxy::util::glob_error;
using kproxy::util::glob_match;

TEST_CASE("glob matching") {
  CHECK(glob_match("orders-*", "orders-1"));
  CHECK(glob_match("*", ""));
  CHECK(!glob_match("orders-*", "order"));
  CHECK(glob_match("a?c", "abc"));
  CHECK(glob_match("t[0-9]", "t7"));
  CHECK(!glob_match("t[!0-9]", "t7"));
  CHECK(glob_match("a\\*", "a*"));
  CHECK(!glob_match("a\\*", "ab"));
  CHECK(glob_match("*-*-x", "a-b-c-x"));
  CHECK(glob_error("t[0-9").find("unclosed") != std::string::npos);
  CHECK(glob_error("x\\").find("lone") != std::string::npos);
}
