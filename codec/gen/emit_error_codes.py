"""Emits codec/generated/error_code.h/.cc: the ErrorCode enum and Kafka's error names."""

import re

from cpp import cpp_string
from model import GenError, upper_to_camel


def emit(out, errors):
    h = ["// Kafka's error codes (org.apache.kafka.common.protocol.Errors), listed at import time.",
         "#pragma once", "", "#include <cstdint>", "#include <optional>", "#include <span>", "#include <string_view>", "",
         "namespace kproxy::codec {", "", "enum class ErrorCode : int16_t {"]
    seen = set()
    for e in errors:
        if not re.match(r"^[A-Z][A-Z0-9_]*$", e["name"]) or not isinstance(e["code"], int):
            raise GenError(f"bad error entry {e!r}")
        n = "k" + upper_to_camel(e["name"])
        if n in seen:
            raise GenError(f"two errors map to {n}")
        seen.add(n)
        h.append(f"  {n} = {e['code']},  // {e['name']}")
    h += ["};", "",
          "/// Kafka's upper-case name of an error code (\"NOT_COORDINATOR\"), or nullptr if unknown.",
          "const char* error_name(int16_t code);",
          "/// The code of an error by Kafka's name (\"NOT_COORDINATOR\"), or nullopt.",
          "std::optional<int16_t> error_code_for_name(std::string_view name);",
          "/// Every error code Kafka defines, ascending.",
          "std::span<const int16_t> all_error_codes();", "",
          "}  // namespace kproxy::codec"]
    out.add("codec/generated/error_code.h", h)
    codes = [e["code"] for e in errors]
    lo = min(codes)
    c = ['#include "codec/generated/error_code.h"', "", "#include <array>", "", "namespace kproxy::codec {", "namespace {", "",
         f"constexpr int16_t kLowest = {lo};",
         "// Indexed by code - kLowest; nullptr where Kafka defines no error.",
         f"constexpr std::array<const char*, {max(codes) - lo + 1}> kNames{{"]
    by = {e["code"]: e["name"] for e in errors}
    for code in range(lo, max(codes) + 1):
        c.append(f"    {cpp_string(by[code]) if code in by else 'nullptr'},  // {code}")
    c += ["};", f"constexpr std::array<int16_t, {len(codes)}> kCodes{{" + ", ".join(str(x) for x in sorted(codes)) + "};", "",
          "}  // namespace", "",
          "const char* error_name(int16_t code) {",
          "  if (code < kLowest || code - kLowest >= static_cast<int>(kNames.size())) return nullptr;",
          "  return kNames[static_cast<size_t>(code - kLowest)];",
          "}", "",
          "std::optional<int16_t> error_code_for_name(std::string_view name) {",
          "  for (size_t i = 0; i < kNames.size(); ++i) {",
          "    if (kNames[i] != nullptr && name == kNames[i]) return static_cast<int16_t>(static_cast<int>(i) + kLowest);",
          "  }",
          "  return std::nullopt;",
          "}", "",
          "std::span<const int16_t> all_error_codes() { return kCodes; }", "",
          "}  // namespace kproxy::codec"]
    out.add("codec/generated/error_code.cc", c)
