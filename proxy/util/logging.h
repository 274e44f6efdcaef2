// Logging setup: spdlog to stderr, as text or as one JSON object per line.
//
// Connection code prefixes every line with "conn=<id>" (see ClientConnection), so a grep for one
// id gives that connection's whole story, including the reason it was closed.
#pragma once

#include <string>

#include "config/config.h"

namespace kproxy::util {

/// Installs the default logger for `log` (format and level). Safe to call again on reload.
void configure_logging(const config::LogConfig& log);

/// `text` escaped for use inside a JSON string (quotes, backslashes, control characters).
std::string json_escape(std::string_view text);

}  // namespace kproxy::util
