// FaultRule: one chaos rule = match + action + trigger, with its hit counters (docs/faults.md).
// The reference for the rule format is docs/admin-api.openapi.yaml (components.schemas.FaultRule);
// below is a summary.
//
// Rules are immutable once built (parse_fault_rule), shared by every worker thread through a
// RuleSet snapshot; only the counters (relaxed atomics) change at run time. A rule is written as
// JSON (admin API) or YAML (the `faults:` config section, same keys):
//
//   {"name": "fence-orders",
//    "match":   {"api": "AddPartitionsToTxn" | ["EndTxn", 26], "versions": "3-5",
//                "listener": "glob", "client_id": "glob", "transactional_id": "orders-*",
//                "topic": "glob", "partition": 0 | [0, 1], "producer_id": 1000, "group_id": "glob"},
//    "action":  {"error": "PRODUCER_FENCED", "scope": "all" | "top" | "matched"}
//             | {"answer": "NOT_COORDINATOR"}            // kproxy answers, broker never sees it
//             | {"delay": "200ms", "jitter": "50ms", "side": "request" | "response"}
//             | {"drop_response": true}                  // blackhole (proxy/chaos/fault_stage.h)
//             | {"close": "before" | "after"}
//             | {"throttle": "500ms"}                     // ThrottleTimeMs in the response
//             | {"reset_after_bytes": 1000}               // transport: reset (RST) after N more response bytes
//             | {"duplicate_request": true}               // sent to the broker twice, the second answer swallowed
//             | {"bandwidth": 65536, "direction": "to_client" | "to_broker" | "both"}   // bytes per second
//             | {"slice": 64, "slice_delay": "5ms", "direction": ...}                  // split writes into N-byte pieces
//    "trigger": {"once": true} | {"nth": 3} | {"times": 2} | {"after": 1, "times": 2}
//             | {"probability": 0.3, "seed": 42} | {"always": true},
//    "window":  {"after": "1s", "for": "10s"}}          // optional, relative to when the rule was set
//
// `topic` also matches requests that name topics by id (KIP-516: Produce v13+, Fetch v13+): the
// id's name comes from the Metadata responses kproxy has forwarded (proxy/cluster/topic_names.h).
//
// Trigger arithmetic: a matching frame is hit number n (1-based, counted atomically across
// workers). Hits n <= after are skipped; of the rest, k = n - after is injected when the counting
// trigger allows it (once: k == 1, nth: k == N, times: k <= N, always) and, with a probability,
// when hash(seed, n) < p — so a seeded run injects on the same hit numbers every time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "proxy/chaos/refusal.h"

#include "proxy/util/glob.h"

namespace kproxy::chaos {

using util::glob_error;
using util::glob_match;

struct VersionBounds {
  int16_t min = 0;
  int16_t max = 0x7fff;
  bool contains(int16_t v) const { return v >= min && v <= max; }
};

struct RuleMatch {
  std::vector<int16_t> apis;  ///< empty = any API
  VersionBounds versions;
  std::optional<std::string> listener, client_id, transactional_id, topic, group_id;  // globs
  std::vector<int32_t> partitions;                                                    ///< empty = any
  std::optional<int64_t> producer_id;
  /// True when matching needs the decoded request body (entity fields).
  bool needs_body() const { return transactional_id || topic || group_id || !partitions.empty() || producer_id; }
};

enum class ActionKind : uint8_t {
  kError,
  kAnswer,
  kDelay,
  kDropResponse,
  kClose,
  kThrottle,
  kResetAfterBytes,
  kBandwidth,
  kSlice,
  kDuplicateRequest,
};
const char* action_name(ActionKind k);

enum class ErrorScopeKind : uint8_t {
  kAll,      ///< every error-code field of the response
  kTop,      ///< only depth-0 error codes
  kMatched,  ///< only the entries of the matched topics/partitions (plus depth 0 when none)
};

struct RuleAction {
  ActionKind kind = ActionKind::kError;
  int16_t error_code = 0;  ///< kError, kAnswer
  ErrorScopeKind scope = ErrorScopeKind::kAll;
  std::chrono::milliseconds delay{0}, jitter{0};  ///< kDelay
  bool on_request = false;                        ///< kDelay side; kClose: before forwarding
  std::chrono::milliseconds throttle{0};          ///< kThrottle
  uint64_t bytes = 0;                             ///< kResetAfterBytes; kSlice: piece size; kBandwidth: bytes per second
  std::chrono::milliseconds slice_delay{0};       ///< kSlice: between pieces
  /// kBandwidth, kSlice: which bytes of the matched exchange are shaped (the request on its way to
  /// the broker, the response on its way to the client).
  bool to_client = true, to_broker = false;
};

struct RuleTrigger {
  enum class Kind : uint8_t { kAlways, kOnce, kNth, kTimes } kind = Kind::kAlways;
  uint64_t n = 0;      ///< kNth, kTimes
  uint64_t after = 0;  ///< skip this many hits first
  std::optional<double> probability;
  uint64_t seed = 0;
  std::chrono::milliseconds window_after{0};
  std::optional<std::chrono::milliseconds> window_for;
};

/// Counters of one rule; survive a reload or PUT that leaves the rule's definition unchanged.
struct RuleStats {
  std::atomic<uint64_t> hits{0};      ///< frames that matched (inside the time window)
  std::atomic<uint64_t> injected{0};  ///< of those, the ones the trigger let through
};

class FaultRule {
 public:
  std::string name;
  RuleMatch match;
  RuleAction action;
  RuleTrigger trigger;
  /// The rule as given, normalised (what GET returns, and what "unchanged" compares).
  nlohmann::json spec;
  /// Notes on version translation, e.g. "PRODUCER_FENCED is sent as INVALID_PRODUCER_EPOCH to InitProducerId v0-3".
  std::vector<std::string> notes;
  std::shared_ptr<RuleStats> stats = std::make_shared<RuleStats>();
  /// When the rule was installed (LiveRules stamps it on its clock); its window counts from here.
  std::chrono::steady_clock::time_point installed_at{};

  /// Matches the header-level fields (api, version, listener, client id).
  bool matches_header(int16_t api_key, int16_t version, std::string_view listener, std::optional<std::string_view> client_id) const;
  /// Counts a hit and decides whether to inject (thread-safe). `now` for the window.
  bool fire(std::chrono::steady_clock::time_point now) const;
  /// The injection decision for hit number `n` (1-based), without touching counters.
  bool decide(uint64_t n) const;

  nlohmann::json to_json() const;  ///< spec + counters + notes
};

/// Parses and validates one rule. On error returns nullptr and sets `error` to a message that
/// starts with the JSON path of the offending key ("match.api: unknown API 'Foo'").
/// `name` overrides the spec's "name" when non-empty (PUT /faults/{name}). `refusal`, when given,
/// says whether a refused rule is malformed or well formed but not applicable to its APIs.
std::shared_ptr<FaultRule> parse_fault_rule(const nlohmann::json& spec, std::string& error, std::string_view name = {},
                                            Refusal* refusal = nullptr);

/// Parses a duration: a number (milliseconds) or "250ms", "2s", "1m". nullopt when malformed.
std::optional<std::chrono::milliseconds> parse_duration(const nlohmann::json& v);

}  // namespace kproxy::chaos
