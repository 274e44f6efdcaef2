// Fuzz target: the YAML config loader (config/config_loader.h) on arbitrary text, and the
// faults:/api_versions: sections of every text it accepts (proxy/chaos/config_sections.h), the
// step where aliases are expanded into JSON.
//
// The loader must never crash or throw out of load_config_string: it returns a config or errors.
// Errors and warnings carry a position inside the text (or none) and a reason, a config is never
// returned with errors, and a failed load always says why. The seeds in
// tests/fuzz/corpus/config_loader hold anchors, aliases, merge keys (`<<`, which yaml-cpp reads as
// a plain key), alias chains and deep nesting, so mutations reach the node and depth bounds
// (kMaxConfigNodes, kMaxConfigDepth) and the duplicate-key check.
#include <cstdint>
#include <string>
#include <string_view>

#include "config/config_loader.h"
#include "proxy/chaos/config_sections.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;

namespace {

void check_positions(const std::vector<config::ConfigError>& list, size_t lines) {
  for (const auto& e : list) {
    fuzz::check(e.line >= 0 && e.column >= 0, "negative error position");
    fuzz::check(static_cast<size_t>(e.line) <= lines + 1, "an error position past the end of the text");
    fuzz::check(!e.reason.empty(), "an error without a reason");
    fuzz::check(e.file == "fuzz.yaml", "an error naming another file");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  size_t lines = 0;
  for (char c : yaml) lines += c == '\n' || c == '\r';
  // A fixed range: no /proc read per input, and the ephemeral-range warnings are exercised.
  config::LoadOptions options;
  options.ephemeral_ports = [] { return std::optional<config::PortRange>(config::PortRange{32768, 60999}); };
  config::LoadResult res = config::load_config_string(yaml, "fuzz.yaml", options);
  check_positions(res.warnings, lines);
  if (res.ok()) {
    fuzz::check(res.errors.empty(), "a config was returned together with errors");
    fuzz::check(!res.config->listeners.empty(), "a config without listeners");
    // What the start does next with an accepted file (Proxy::start → prepare_config): the
    // sections are read again and converted to JSON; the loader's node bound keeps this small.
    chaos::ChaosConfig sections;
    (void)chaos::load_chaos_yaml(std::string(yaml), "fuzz.yaml", sections);
  } else {
    fuzz::check(!res.errors.empty(), "the load failed without an error");
    check_positions(res.errors, lines);
    (void)res.error_text();
  }
  // The small parsers the loader uses, on the same text.
  (void)config::parse_duration(yaml);
  (void)config::parse_byte_size(yaml);
  (void)config::parse_ephemeral_ports(yaml);
  return 0;
}
