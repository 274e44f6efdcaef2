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

TEST_CASE("glob: a class range's end is escaped like any element; length counts characters") {
  CHECK(glob_match("[+-\\]]", "]"));  // '+' to ']'
  CHECK(glob_match("[+-\\]]", "A"));
  CHECK(!glob_match("[+-\\]]", "a"));
  CHECK(glob_error("[+-\\]]").empty());
  CHECK(glob_error("[a-\\]").find("unclosed") != std::string::npos);  // the ']' is the range's end
  std::string wide;                                                   // 256 characters of two bytes
  for (int i = 0; i < 256; ++i) wide += "\xC3\xA9";
  CHECK(glob_error(wide).empty());
  CHECK(glob_error(wide + "x").find("257 characters") != std::string::npos);
}
