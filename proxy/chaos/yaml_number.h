#pragma once

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

namespace kproxy::chaos {

/// The number a plain YAML scalar spells (rule files and JSON bodies read through yaml-cpp), or
/// nullopt when the whole text is not one. A value too small for a double reads as the nearest
/// double (0 or a subnormal: JSON's 2.2e-313 is a number, as JSON Schema reads it); one too large
/// for a double is not a number here (it would be infinity).
inline std::optional<double> yaml_number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  if (errno == ERANGE && std::isinf(value)) return std::nullopt;
  return value;
}

}  // namespace kproxy::chaos
