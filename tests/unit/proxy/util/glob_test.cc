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

TEST_CASE("glob: a match covers the whole text, case matters, `?` is exactly one character") {
  CHECK_FALSE(glob_match("orders", "orders-1"));  // no implicit trailing `*`
  CHECK_FALSE(glob_match("rders", "orders"));     // nor leading one
  CHECK_FALSE(glob_match("Orders", "orders"));
  CHECK_FALSE(glob_match("a?", "a"));
  CHECK_FALSE(glob_match("a?", "abc"));
  CHECK(glob_match("a??", "abc"));
  CHECK_FALSE(glob_match("", "x"));
  CHECK(glob_match("", ""));
  CHECK(glob_match("**", "anything"));
  CHECK(glob_match("a*", "a"));  // a trailing `*` matches nothing too
  // `*` backtracks: the first "-x" seen is not the one that ends the text.
  CHECK(glob_match("*-x", "a-x-b-x"));
  CHECK_FALSE(glob_match("*-x", "a-x-b"));
  CHECK(glob_match("a*b*c", "aXbYbZc"));
  CHECK_FALSE(glob_match("a*b*c", "aXbYbZ"));
}

TEST_CASE("glob: classes negate with ! or ^, take ] first as a member, escape with \\; an unclosed [ is a literal") {
  CHECK(glob_match("t[^0-9]", "tx"));
  CHECK_FALSE(glob_match("t[^0-9]", "t5"));
  CHECK(glob_match("[]x]", "]"));  // ']' right after '[' is a member, not the end
  CHECK(glob_match("[]x]", "x"));
  CHECK_FALSE(glob_match("[]x]", "y"));
  CHECK(glob_match("[a\\-z]", "-"));  // an escaped '-' is no range
  CHECK_FALSE(glob_match("[a\\-z]", "m"));
  CHECK(glob_match("[a-cx]", "b"));
  CHECK(glob_match("[a-cx]", "x"));
  CHECK_FALSE(glob_match("[a-cx]", "d"));
  CHECK(glob_match("[?]", "?"));  // `?` and `*` in a class are themselves
  CHECK_FALSE(glob_match("[?]", "a"));
  // glob_error refuses an unclosed '[' (and says where); glob_match alone reads it as a literal '['.
  CHECK(glob_error("ab[cd").find("offset 2") != std::string::npos);
  CHECK(glob_match("ab[cd", "ab[cd"));
  CHECK_FALSE(glob_match("ab[cd", "abc"));
  CHECK(glob_error("a\\[b").empty());  // an escaped '[' opens no class
  CHECK(glob_match("a\\[b", "a[b"));
}

TEST_CASE("glob: the length cap is kMaxGlobLength characters, exactly") {
  CHECK(glob_error(std::string(kproxy::util::kMaxGlobLength, 'a')).empty());
  std::string error = glob_error(std::string(kproxy::util::kMaxGlobLength + 1, 'a'));
  CHECK(error.find("257 characters long (at most 256)") != std::string::npos);
  // The message quotes the first 40 bytes only.
  CHECK(error.find(std::string(41, 'a')) == std::string::npos);
  CHECK(error.find(std::string(40, 'a')) != std::string::npos);
}
