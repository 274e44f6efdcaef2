#include "proxy/util/logging.h"

#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "proxy/util/bound_report.h"
#include "tests/unit/support/captured_fd.h"

using kproxy::testing::CapturedFd;
using kproxy::util::json_escape;

namespace {

kproxy::config::LogConfig log_config(kproxy::config::LogConfig::Format format, const char* level) {
  kproxy::config::LogConfig log;
  log.format = format;
  log.level = level;
  return log;
}

/// Back to what the first case leaves: text, nothing logged (other tests' output stays quiet).
void quiet_logging() { kproxy::util::configure_logging(log_config(kproxy::config::LogConfig::Format::kText, "off")); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

}  // namespace

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
  kproxy::util::configure_logging(log);
  log.format = kproxy::config::LogConfig::Format::kText;
  log.level = "off";
  kproxy::util::configure_logging(log);
}

TEST_CASE("JSON escaping: every control character is escaped, bytes of 0x20 and up (UTF-8 included) pass as they are") {
  for (int c = 0; c < 0x20; ++c) {
    std::string escaped = json_escape(std::string(1, static_cast<char>(c)));
    CHECK_MESSAGE(escaped.size() > 1, c);
    CHECK_MESSAGE(escaped[0] == '\\', c);
  }
  CHECK(json_escape("\r") == "\\r");
  CHECK(json_escape(std::string_view("a\0b", 3)) == "a\\u0000b");
  CHECK(json_escape("\x7f") == "\x7f");
  CHECK(json_escape("caf\xC3\xA9 / <tag>") == "caf\xC3\xA9 / <tag>");
}

TEST_CASE("configure_logging: JSON format writes one JSON object per line on standard error, at the level and above") {
  kproxy::util::configure_logging(log_config(kproxy::config::LogConfig::Format::kJson, "info"));
  auto logger = spdlog::get("kproxy");
  REQUIRE(logger);
  std::string err;
  {
    CapturedFd capture(STDERR_FILENO);
    logger->debug("below the level");
    logger->warn("conn=7 closed: \"quoted\" reason\nsecond line");
    logger->info("plain");
    logger->flush();
    err = capture.finish();
  }
  quiet_logging();
  INFO(err);
  auto lines = lines_of(err);
  REQUIRE(lines.size() == 2);
  auto first = nlohmann::json::parse(lines[0], nullptr, false);
  REQUIRE_FALSE(first.is_discarded());
  CHECK(first["level"] == "warning");
  CHECK(first["msg"] == "conn=7 closed: \"quoted\" reason\nsecond line");
  CHECK(first["time"].is_string());
  CHECK(first["thread"].is_number());
  auto second = nlohmann::json::parse(lines[1], nullptr, false);
  REQUIRE_FALSE(second.is_discarded());
  CHECK(second["msg"] == "plain");
  CHECK(err.find("below the level") == std::string::npos);
}

TEST_CASE("configure_logging: text format writes the message as it is; the level follows a second call") {
  kproxy::util::configure_logging(log_config(kproxy::config::LogConfig::Format::kText, "warn"));
  auto logger = spdlog::get("kproxy");
  REQUIRE(logger);
  std::string err;
  {
    CapturedFd capture(STDERR_FILENO);
    logger->info("not at warn");
    logger->error("conn=9 broken");
    kproxy::util::configure_logging(log_config(kproxy::config::LogConfig::Format::kText, "debug"));
    logger->debug("now at debug");
    logger->flush();
    err = capture.finish();
  }
  quiet_logging();
  INFO(err);
  auto lines = lines_of(err);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find(" error [") != std::string::npos);
  CHECK(lines[0].size() >= std::string(" conn=9 broken").size());
  CHECK(lines[0].substr(lines[0].size() - 14) == " conn=9 broken");
  CHECK(lines[0].front() != '{');
  CHECK(lines[1].find(" debug [") != std::string::npos);
  CHECK(lines[1].find("now at debug") != std::string::npos);
  CHECK(err.find("not at warn") == std::string::npos);
}

TEST_CASE("configure_logging: report_bound's lines follow log.format") {
  std::string out;
  {
    CapturedFd capture(STDOUT_FILENO);
    kproxy::util::configure_logging(log_config(kproxy::config::LogConfig::Format::kJson, "off"));
    kproxy::util::report_bound("listener", "kafka", "127.0.0.1:41234");
    kproxy::util::configure_logging(log_config(kproxy::config::LogConfig::Format::kText, "off"));
    kproxy::util::report_bound("listener", "kafka", "127.0.0.1:41234");
    out = capture.finish();
  }
  quiet_logging();
  INFO(out);
  auto lines = lines_of(out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == R"({"kproxy":"bound","kind":"listener","label":"kafka","address":"127.0.0.1:41234"})");
  CHECK(lines[1] == "kproxy bound listener kafka 127.0.0.1:41234");
}
