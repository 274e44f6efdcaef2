#pragma once

#include <cstdint>

namespace kproxy::chaos {

/// Why fault rules, a scenario or a rule change were refused, as the admin API answers it
/// (docs/admin-api.openapi.yaml, "Refusals"):
/// - kMalformed: input the OpenAPI schema refuses too (an unknown key, a bad glob, an error a
///   named API never returns) — 400;
/// - kUnprocessable: input the schema allows but kproxy cannot apply because of what the named
///   APIs are — versions an API does not have, an empty version range, an answer kproxy cannot
///   build for an API's versions, a rule name used twice in one list — 422;
/// - kConflict: valid input that clashes with what is installed — a scenario rule named like a
///   rule of the config, more rules than limits.max_fault_rules — 409.
/// When several refusals are reported at once, the first kind in this order wins.
enum class Refusal : uint8_t { kNone, kMalformed, kUnprocessable, kConflict };

/// Folds another refusal into `worst`: a malformed input is malformed whatever else it holds.
inline void note_refusal(Refusal& worst, Refusal next) {
  if (next == Refusal::kNone) return;
  if (worst == Refusal::kNone || static_cast<uint8_t>(next) < static_cast<uint8_t>(worst)) worst = next;
}

}  // namespace kproxy::chaos
