"""Emits codec/generated/api_keys.h/.cc: the ApiKey enum, API names, version ranges and the
header-version table."""

from cpp import cpp_string
from model import api_base_name, empty


def emit(out, reqs, resps):
    keys = sorted(reqs)
    h = ["// Kafka API keys and their version tables, from Kafka's message definitions.",
         "#pragma once", "", "#include <cstdint>", "#include <optional>", "#include <span>", "#include <string_view>", "",
         "namespace kproxy::codec {", "",
         "/// Every API key Kafka defines (including removed ones, whose version range is empty).",
         "enum class ApiKey : int16_t {"]
    for k in keys:
        h.append(f"  k{api_base_name(reqs[k].name)} = {k},")
    h += ["};", "",
          "/// An inclusive version range; empty when min > max.",
          "struct VersionRange {",
          "  int16_t min = 0;",
          "  int16_t max = -1;",
          "  bool empty() const { return min > max; }",
          "  bool contains(int16_t v) const { return v >= min && v <= max; }",
          "};", "",
          "/// Kafka's name of an API (\"Metadata\"), or nullptr for a key Kafka does not define.",
          "const char* api_name(int16_t api_key);",
          "/// The key of an API by its name (\"Metadata\"), or nullopt.",
          "std::optional<int16_t> api_key_for_name(std::string_view name);",
          "/// Every API key Kafka defines, ascending.",
          "std::span<const int16_t> all_api_keys();",
          "/// Versions Kafka 4.4.0 defines for requests of `api_key` (empty for unknown or removed APIs).",
          "VersionRange request_versions(int16_t api_key);",
          "/// Versions Kafka defines for responses of `api_key` (equal to the request versions in 4.4.0).",
          "VersionRange response_versions(int16_t api_key);",
          "/// True when `version` is a defined request version of `api_key`.",
          "bool is_valid_version(int16_t api_key, int16_t version);",
          "/// First flexible (KIP-482) version of the request, or -1 if never flexible or unknown.",
          "int16_t first_flexible_version(int16_t api_key);",
          "/// True when the latest version is marked unstable (latestVersionUnstable) in Kafka.",
          "bool latest_version_unstable(int16_t api_key);",
          "/// Request header version for a request, or -1 for an unknown key or version.",
          "/// Non-flexible bodies use header v1, flexible ones v2.",
          "int request_header_version(int16_t api_key, int16_t version);",
          "/// Response header version, or -1 for an unknown key or version. Non-flexible bodies use",
          "/// header v0, flexible ones v1, except ApiVersions, whose responses always use v0 (KIP-511).",
          "int response_header_version(int16_t api_key, int16_t version);", "",
          "}  // namespace kproxy::codec"]
    out.add("codec/generated/api_keys.h", h)
    c = ['#include "codec/generated/api_keys.h"', "", "#include <array>", "", "namespace kproxy::codec {", "namespace {", "",
         "struct ApiInfo {", "  int16_t key;", "  const char* name;", "  VersionRange request;", "  VersionRange response;",
         "  int16_t request_flexible;   // -1: never", "  int16_t response_flexible;  // -1: never", "  bool unstable;", "};", "",
         f"constexpr std::array<ApiInfo, {len(keys)}> kApis{{{{"]
    for k in keys:
        rq, rs = reqs[k], resps[k]

        def rng(m):
            return f"{{{m.valid[0]}, {min(m.valid[1], 0x7fff)}}}" if not m.removed else "{0, -1}"

        def fl(m):
            if m.removed or empty(m.flexible):
                return "-1"
            return str(max(m.flexible[0], m.valid[0]))
        c.append(f"    {{{k}, {cpp_string(api_base_name(rq.name))}, {rng(rq)}, {rng(rs)}, {fl(rq)}, {fl(rs)}, {'true' if rq.unstable else 'false'}}},")
    c += ["}};", "",
          f"constexpr std::array<int16_t, {len(keys)}> kKeys{{" + ", ".join(str(k) for k in keys) + "};", "",
          "const ApiInfo* find(int16_t key) {",
          "  for (const auto& a : kApis) {",
          "    if (a.key == key) return &a;",
          "  }",
          "  return nullptr;",
          "}", "",
          "}  // namespace", "",
          "const char* api_name(int16_t api_key) {",
          "  const ApiInfo* a = find(api_key);",
          "  return a ? a->name : nullptr;",
          "}", "",
          "std::optional<int16_t> api_key_for_name(std::string_view name) {",
          "  for (const auto& a : kApis) {",
          "    if (name == a.name) return a.key;",
          "  }",
          "  return std::nullopt;",
          "}", "",
          "std::span<const int16_t> all_api_keys() { return kKeys; }", "",
          "VersionRange request_versions(int16_t api_key) {",
          "  const ApiInfo* a = find(api_key);",
          "  return a ? a->request : VersionRange{};",
          "}", "",
          "VersionRange response_versions(int16_t api_key) {",
          "  const ApiInfo* a = find(api_key);",
          "  return a ? a->response : VersionRange{};",
          "}", "",
          "bool is_valid_version(int16_t api_key, int16_t version) { return request_versions(api_key).contains(version); }", "",
          "int16_t first_flexible_version(int16_t api_key) {",
          "  const ApiInfo* a = find(api_key);",
          "  return a ? a->request_flexible : -1;",
          "}", "",
          "bool latest_version_unstable(int16_t api_key) {",
          "  const ApiInfo* a = find(api_key);",
          "  return a != nullptr && a->unstable;",
          "}", "",
          "int request_header_version(int16_t api_key, int16_t version) {",
          "  const ApiInfo* a = find(api_key);",
          "  if (a == nullptr || !a->request.contains(version)) return -1;",
          "  return a->request_flexible >= 0 && version >= a->request_flexible ? 2 : 1;",
          "}", "",
          "int response_header_version(int16_t api_key, int16_t version) {",
          "  const ApiInfo* a = find(api_key);",
          "  if (a == nullptr || !a->response.contains(version)) return -1;",
          f"  if (api_key == {[k for k in keys if reqs[k].name == 'ApiVersionsRequest'][0]}) return 0;  // ApiVersions: always v0 (KIP-511)",
          "  return a->response_flexible >= 0 && version >= a->response_flexible ? 1 : 0;",
          "}", "",
          "}  // namespace kproxy::codec"]
    out.add("codec/generated/api_keys.cc", c)
