// Tests for proxy/util/utf8.h.
#include "proxy/util/utf8.h"

#include <string>

#include <doctest/doctest.h>

using kproxy::util::code_points;

TEST_CASE("code_points: counts characters as JSON Schema does, not bytes") {
  CHECK(code_points("") == 0);
  CHECK(code_points("orders-*") == 8);
  CHECK(code_points("\xC3\xA9") == 1);  // é, two bytes
  CHECK(code_points("\xE2\x82\xAC"
                    "5") == 2);                          // €5
  CHECK(code_points("\xF0\x9F\x98\x80 fenced") == 8);    // an emoji of four bytes, then 7 ASCII
  CHECK(code_points(std::string_view("a\0b", 3)) == 3);  // NUL is a character
}
