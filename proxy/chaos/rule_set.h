// RuleSet and LiveRules: the immutable snapshot of the rules kproxy applies to traffic — the
// fault rules (chaos) and the ApiVersions policy (production) — that the workers read, and the
// one place (admin API, config load/reload) that changes them.
//
//   admin thread ── PUT/DELETE/reset/reload ──► LiveRules (mutex) ──► new RuleSet ──┐
//                                                                                      │ generation++
//   worker loop ── per frame: generation() changed? ──► current() (shared_ptr copy) ◄──┘
//
// A change applies from the next frame on every connection, without reconnecting. A rule whose
// definition is unchanged keeps its RuleStats (hit/injection counters) across a replace.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proxy/chaos/fault_rule.h"
#include "proxy/policy/api_versions_policy.h"
#include "proxy/util/clock.h"

namespace kproxy::chaos {

struct RuleSet {
  std::vector<std::shared_ptr<const FaultRule>> rules;  ///< in order; the first matching rule of each action wins
  policy::ApiVersionsPolicy api_versions;
  /// Per api key: some rule names it (or matches any API). Index 0..kApiSlots-1.
  static constexpr int kApiSlots = 128;
  std::array<bool, kApiSlots> api_has_rules{};
  bool any_api_rules = false;  ///< a rule without `api` (matches everything)

  bool may_match(int16_t api_key) const {
    if (any_api_rules) return true;
    return api_key >= 0 && api_key < kApiSlots && api_has_rules[static_cast<size_t>(api_key)];
  }
  void index();
};

/// Counters of one rule for export (kproxy_faults_injected_total{rule,api,action}).
struct RuleCounters {
  std::string rule;
  std::vector<std::string> apis;  ///< API names the rule matches; empty = any
  std::string action;
  uint64_t hits = 0;
  uint64_t injected = 0;
};

/// The live rules: fault rules and the ApiVersions policy, replaced as a whole snapshot (RuleSet)
/// by the admin thread and config reloads, read by every worker. One per process (Proxy).
class LiveRules {
 public:
  /// `clock`: stamps each rule's install time (where its window counts from); it must outlive
  /// the rules.
  explicit LiveRules(const util::Clock& clock = util::steady_clock());

  /// The snapshot to use. Cheap to call when generation() has not changed since the last copy.
  std::shared_ptr<const RuleSet> current() const;
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  /// Adds or replaces the rule `name` with `spec` (JSON). "" or why it was refused (nothing changed).
  /// A new rule is refused when `max_rules` are installed already (limits.max_fault_rules); a
  /// replacement never is. `refusal`, when given, gets the kind of a refusal.
  std::string put_rule(const std::string& name, const nlohmann::json& spec, size_t max_rules = SIZE_MAX, Refusal* refusal = nullptr);
  /// False when there is no such rule.
  bool delete_rule(const std::string& name);
  /// Removes every rule (the ApiVersions policy stays).
  void reset_rules();
  /// Replaces the ApiVersions policy. "" or why refused; `unprocessable`, when given, is set when
  /// the list is well formed but cannot apply (policy::parse_api_versions_policy).
  std::string set_api_versions(const nlohmann::json& list, bool* unprocessable = nullptr);
  /// Replaces everything at once (config load / reload): rules already parsed, policy parsed.
  void replace(std::vector<std::shared_ptr<FaultRule>> rules, policy::ApiVersionsPolicy api_versions);

  std::shared_ptr<const FaultRule> rule(const std::string& name) const;
  std::vector<RuleCounters> counters() const;

 private:
  void publish(std::shared_ptr<RuleSet> next);

  const util::Clock& clock_;
  mutable std::mutex mutex_;
  std::shared_ptr<const RuleSet> current_;
  std::atomic<uint64_t> generation_{1};
};

}  // namespace kproxy::chaos
