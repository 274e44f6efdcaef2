// Error codes of hot responses without decoding them into structs (no allocation).
//
// Counting every non-zero error code means looking into every response; for Produce (the hot
// path of a producing workload) a full decode allocates the topic and partition vectors. This
// scanner walks a ProduceResponse body (v3-v13) and reports its error codes. It is checked
// against the generated codec's for_each_error_code for every version (response_errors_test.cc);
// when it does not parse, the caller decodes normally.
#pragma once

#include <array>
#include <cstdint>

#include "codec/reader.h"

namespace kproxy::metrics {

/// Up to kMaxScannedErrors non-zero error codes of one response.
inline constexpr size_t kMaxScannedErrors = 32;
struct ScannedErrors {
  std::array<int16_t, kMaxScannedErrors> codes{};
  size_t count = 0;
};

/// Scans a ProduceResponse body at `version`. False when it does not parse, the version is not
/// covered, or it holds more than kMaxScannedErrors errors (then decode it instead).
bool scan_produce_response_errors(codec::Bytes body, int16_t version, ScannedErrors& out);

/// The body of a response frame (size prefix and response header skipped), or false.
bool response_body(codec::Bytes frame, int header_version, codec::Bytes& body);

}  // namespace kproxy::metrics
