#include "proxy/util/bound_report.h"

#include <unistd.h>

#include <doctest/doctest.h>

#include "tests/unit/support/captured_fd.h"

using kproxy::util::bound_line;

TEST_CASE("one line per bound socket, five fields, the address last") {
  CHECK(bound_line("listener", "kafka", "127.0.0.1:41234") == "kproxy bound listener kafka 127.0.0.1:41234");
  CHECK(bound_line("broker", "kafka/node-3", "[::1]:41235") == "kproxy bound broker kafka/node-3 [::1]:41235");
  CHECK(bound_line("admin", "api", "127.0.0.1:9644") == "kproxy bound admin api 127.0.0.1:9644");
}

TEST_CASE("under JSON logs the line is one JSON object") {
  CHECK(bound_line("listener", "kafka", "127.0.0.1:41234", /*json=*/true) ==
        R"({"kproxy":"bound","kind":"listener","label":"kafka","address":"127.0.0.1:41234"})");
  CHECK(bound_line("broker", "odd\"name/node-1", "[::1]:1", true) ==
        R"({"kproxy":"bound","kind":"broker","label":"odd\"name/node-1","address":"[::1]:1"})");
}

TEST_CASE("JSON lines escape what they carry: a label with a backslash or a newline stays one object on one line") {
  std::string line = bound_line("broker", "a\\b\nc", "[::1]:2", true);
  CHECK(line == R"({"kproxy":"bound","kind":"broker","label":"a\\b\nc","address":"[::1]:2"})");
  CHECK(line.find('\n') == std::string::npos);
  // Text lines carry the fields as they are.
  CHECK(bound_line("admin", "api", "127.0.0.1:1") == "kproxy bound admin api 127.0.0.1:1");
}

TEST_CASE("report_bound writes its line and a newline to standard output, as text or as JSON after set_bound_report_json") {
  std::string text, json;
  {
    kproxy::testing::CapturedFd out(STDOUT_FILENO);
    kproxy::util::set_bound_report_json(false);
    kproxy::util::report_bound("listener", "kafka", "127.0.0.1:41234");
    text = out.finish();
  }
  {
    kproxy::testing::CapturedFd out(STDOUT_FILENO);
    kproxy::util::set_bound_report_json(true);
    kproxy::util::report_bound("admin", "api", "127.0.0.1:41236");
    kproxy::util::set_bound_report_json(false);
    json = out.finish();
  }
  // Other output of the process (a logger on stdout) may share the stream: the line is whole.
  CHECK(text.find("kproxy bound listener kafka 127.0.0.1:41234\n") != std::string::npos);
  CHECK(json.find(R"({"kproxy":"bound","kind":"admin","label":"api","address":"127.0.0.1:41236"})"
                  "\n") != std::string::npos);
  CHECK(json.find("kproxy bound admin") == std::string::npos);
}
