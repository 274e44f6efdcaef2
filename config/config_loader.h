// Loading and validating a Config from YAML.
//
// Every problem is reported with the file, the 1-based line and column (from yaml-cpp's Mark) and
// what is wrong, e.g. "kproxy.yaml:7:15: listeners[0].listen: port must be a number from 1 to
// 65535". Unknown keys are errors, so a typo never silently falls back to a default.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace kproxy::config {

struct ConfigError {
  std::string file;
  int line = 0;    ///< 1-based; 0 when the error has no position (e.g. unreadable file)
  int column = 0;  ///< 1-based
  std::string reason;

  /// "file:line:column: reason".
  std::string to_string() const;
};

/// The outcome of a load: a config, or every error found (validation does not stop at the first).
struct LoadResult {
  std::shared_ptr<const Config> config;
  std::vector<ConfigError> errors;

  bool ok() const { return config != nullptr; }
  /// All errors, one per line.
  std::string error_text() const;
};

/// Reads and validates the YAML file at `path`.
LoadResult load_config_file(const std::string& path);

/// Parses and validates `yaml`; `source` names it in errors.
LoadResult load_config_string(std::string_view yaml, const std::string& source);

/// "30s", "500ms", "2m", "1h" or a bare number of seconds. nullopt when malformed.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

/// "100MiB", "64KiB", "1GiB", "10MB", "512" (bytes). nullopt when malformed.
std::optional<size_t> parse_byte_size(std::string_view text);

}  // namespace kproxy::config
