#include "proxy/util/logging.h"

#include <doctest/doctest.h>

using kproxy::proxy::json_escape;

TEST_CASE("JSON escaping of log messages") {
  CHECK(json_escape("plain") == "plain");
  CHECK(json_escape("a \"quoted\" \\ path") == "a \\\"quoted\\\" \\\\ path");
  CHECK(json_escape("line\nbreak\ttab") == "line\\nbreak\\ttab");
  CHECK(json_escape(std::string_view("\x01\x1f", 2)) == "\\u0001\\u001f");
}

TEST_CASE("configure_logging accepts both formats and can be called again") {
  kproxy::config::LogConfig log;
  log.format = kproxy::config::LogConfig::Format::kJson;
  log.level = "warn";
  kproxy::proxy::configure_logging(log);
  log.format = kproxy::config::LogConfig::Format::kText;
  log.level = "off";
  kproxy::proxy::configure_logging(log);
}
