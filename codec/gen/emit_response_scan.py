"""Emits codec/generated/response_scan.h/.cc: scan_response(), which walks a response body
exactly as the generated decoder reads it (same nullability and bounds checks) but builds and
allocates nothing: every field is skipped, a non-zero error-code field is reported with its
offset, and the tags of the top-level tagged fields present are collected."""

from cpp import cond, func, when
from wire import code_for, scan_function, tag_section


def scans_inside(f):
    """A tagged field worth walking (it holds error codes); others are skipped by size."""
    return f.is_error_code() or (f.is_struct and f.msg.structs[f.base].has_errors)


def walked_structs(msg):
    """The structs a scan enters (in msg.order): those under regular fields, and those under
    tagged fields that hold error codes; any other tagged field is skipped by its size."""
    seen, todo = {msg.top.name}, [msg.top]
    while todo:
        s = todo.pop()
        for f in s.fields:
            if f.is_struct and (not f.tagged or scans_inside(f)) and f.base not in seen:
                seen.add(f.base)
                todo.append(msg.structs[f.base])
    return [s for s in msg.order if s.name in seen]


def scan_body(s):
    msg = s.msg
    flex = msg.flexible_cond()
    out = [f"[[maybe_unused]] const bool flexible_ = {flex};"]
    for f in s.regular:
        out += when(cond(f.versions, msg.valid), code_for(f).scan(f.flex_var()))
    if flex != "false":
        cases = [(f.tag, cond(f.tagged_versions, msg.valid), code_for(f).scan("true") + ["check_tag_end(r, tag_end_);", "continue;"])
                 for f in s.tagged if scans_inside(f)]
        each = ["if (tag_ < 64) out.top_level_tags |= uint64_t{1} << tag_;"] if s.is_top() else []
        out += when(flex, tag_section(cases, ["r.skip(tag_size_);"], each=each))
    return out


def emit(out, msgs):
    resps = sorted((m for m in msgs if m.kind == "response"), key=lambda m: m.api_key)
    h = ["// Error codes and top-level tagged fields of a response, found without decoding it.",
         "//",
         "// scan_response() walks a response body exactly as the generated decoder reads it (same",
         "// nullability and bounds checks) but builds nothing and allocates nothing: every field is",
         "// skipped, each non-zero error-code field (the fields for_each_error_code visits) is reported",
         "// with its offset in the body, and the tags of the top-level tagged fields present are",
         "// collected (e.g. KIP-951's NodeEndpoints, tag 0 of Produce v10+ and Fetch v16+ responses).",
         "// The hot path uses it to count errors and to know whether a body names brokers before",
         "// paying for a decode.",
         "#pragma once", "", "#include <array>", "#include <cstddef>", "#include <cstdint>", "",
         '#include "codec/reader.h"', "", "namespace kproxy::codec {", "",
         "/// One non-zero error code in a scanned response.",
         "struct ScannedError {",
         "  int16_t code;",
         "  uint32_t offset;  ///< of the int16 in the body (after the response header)",
         "  uint16_t depth;   ///< 0 = a field of the top-level struct, 1 = one struct down, ...",
         "};", "",
         "/// What scan_response() found.",
         "struct ResponseScan {",
         "  static constexpr size_t kMaxErrors = 32;",
         "  /// User-provided so that making one (once per response) does not clear `errors`.",
         "  ResponseScan() {}",
         "  std::array<ScannedError, kMaxErrors> errors;  ///< the first error_count are set",
         "  size_t error_count = 0;",
         "  bool errors_overflow = false;  ///< more than kMaxErrors non-zero codes: errors holds the first ones",
         "  uint64_t top_level_tags = 0;  ///< bit t: top-level tagged field t (< 64) is present",
         "",
         "  bool has_top_level_tag(uint32_t tag) const { return tag < 64 && (top_level_tags >> tag & 1) != 0; }",
         "  void add_error(int16_t code, size_t offset, int depth) {",
         "    if (error_count == kMaxErrors) {",
         "      errors_overflow = true;",
         "      return;",
         "    }",
         "    errors[error_count++] = ScannedError{code, static_cast<uint32_t>(offset), static_cast<uint16_t>(depth)};",
         "  }",
         "};", "",
         "/// Scans the response body `body` of `api_key` at `version` into `out` (reset first). False",
         "/// when the API or version is unknown or the body does not parse to its last byte; `out` is",
         "/// then incomplete and the caller decodes instead.",
         "bool scan_response(int16_t api_key, int16_t version, Bytes body, ResponseScan& out);", "",
         "}  // namespace kproxy::codec"]
    out.add("codec/generated/response_scan.h", h)
    c = ['#include "codec/generated/response_scan.h"', "", '#include "codec/message_support.h"', "", "namespace kproxy::codec {",
         "namespace {", ""]
    walked = [s for m in resps for s in walked_structs(m)]
    for s in walked:
        c.append(f"void {scan_function(s)}(Reader& r, int16_t version, int depth, ResponseScan& out);")
    c.append("")
    for s in walked:
        c += func(f"void {scan_function(s)}([[maybe_unused]] Reader& r, [[maybe_unused]] int16_t version, [[maybe_unused]] int depth, "
                  f"[[maybe_unused]] ResponseScan& out)", scan_body(s))
    c += ["}  // namespace", "",
          "bool scan_response(int16_t api_key, int16_t version, Bytes body, ResponseScan& out) {",
          "  out.error_count = 0;", "  out.errors_overflow = false;", "  out.top_level_tags = 0;",
          "  Reader r(body);", "  switch (api_key) {"]
    for m in resps:
        c.append(f"    case {m.api_key}:")
        c.append(f"      if (version < {m.valid[0]} || version > {m.valid[1]}) return false;")
        c.append(f"      {scan_function(m.top)}(r, version, 0, out);")
        c.append("      break;")
    c += ["    default:", "      return false;", "  }", "  return r.ok() && r.at_end();", "}", "",
          "}  // namespace kproxy::codec"]
    out.add("codec/generated/response_scan.cc", c)
