#include "proxy/util/logging.h"

#include "proxy/util/bound_report.h"

#include <mutex>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace kproxy::util {

namespace {

// "%*" in the JSON pattern: the message, escaped for a JSON string.
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string escaped = json_escape(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessageFlag>(); }
};

}  // namespace

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char* kHex = "0123456789abcdef";
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += ch;
        }
    }
  }
  return out;
}

void configure_logging(const config::LogConfig& log) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  auto logger = spdlog::get("kproxy");
  if (!logger) {
    logger = std::make_shared<spdlog::logger>("kproxy", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    spdlog::register_logger(logger);
    spdlog::set_default_logger(logger);
  }
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  set_bound_report_json(log.format == config::LogConfig::Format::kJson);
  if (log.format == config::LogConfig::Format::kJson) {
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","thread":%t,"msg":"%*"})");
  } else {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l [%t] %v");
  }
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::from_str(log.level));
  logger->flush_on(spdlog::level::info);
}

}  // namespace kproxy::util
