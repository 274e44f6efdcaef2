// Fuzz target: the YAML config loader (config/config_loader.h) on arbitrary text.
//
// The loader must never crash or throw out of load_config_string: it returns a config or errors.
// Errors carry a position inside the text (or none), a config is never returned with errors, and
// a failed load always says why.
#include <cstdint>
#include <string>
#include <string_view>

#include "config/config_loader.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  config::LoadResult res = config::load_config_string(yaml, "fuzz.yaml");
  if (res.ok()) {
    fuzz::check(res.errors.empty(), "a config was returned together with errors");
  } else {
    fuzz::check(!res.errors.empty(), "the load failed without an error");
    for (const auto& e : res.errors) {
      fuzz::check(e.line >= 0 && e.column >= 0, "negative error position");
      fuzz::check(!e.reason.empty(), "an error without a reason");
    }
    (void)res.error_text();
  }
  // The small parsers the loader uses, on the same text.
  (void)config::parse_duration(yaml);
  (void)config::parse_byte_size(yaml);
  return 0;
}
