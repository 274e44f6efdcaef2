#include "config/admin_token.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <doctest/doctest.h>

using namespace kproxy::config;

TEST_CASE("admin token: surrounding spaces, tabs and line ends go, inner bytes stay") {
  CHECK(strip_token("s3cret\n") == "s3cret");
  CHECK(strip_token(" \t s3cret \r\n") == "s3cret");
  CHECK(strip_token("a b") == "a b");  // the loader refuses it; stripping does not hide it
  CHECK(strip_token(" \n\t").empty());
}

TEST_CASE("admin token: read from a file as admin.token_file names it") {
  std::string path = "/tmp/kproxy-admin-token-test-" + std::to_string(::getpid());
  std::ofstream(path) << "  token-from-file\n";
  CHECK(read_admin_token_file(path) == std::optional<std::string>("token-from-file"));
  std::remove(path.c_str());
  CHECK_FALSE(read_admin_token_file(path));
}
