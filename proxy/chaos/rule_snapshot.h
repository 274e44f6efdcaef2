// RuleSnapshot: a connection's view of the current fault rules and ApiVersions policy.
//
// The admin API and reloads swap the rule set atomically (proxy/chaos/rule_set.h); a connection
// keeps its own shared_ptr to the set and takes the new one on the next frame after the
// generation changed: one atomic load per frame, no lock.
#pragma once

#include <cstdint>
#include <memory>

#include "proxy/chaos/rule_set.h"

namespace kproxy::chaos {

class RuleSnapshot {
 public:
  explicit RuleSnapshot(const LiveRules& control) : control_(control) {}
  const RuleSet& get() {
    uint64_t g = control_.generation();
    if (g != generation_ || !rules_) {
      rules_ = control_.current();
      generation_ = g;
    }
    return *rules_;
  }

 private:
  const LiveRules& control_;
  uint64_t generation_ = 0;
  std::shared_ptr<const RuleSet> rules_;
};

}  // namespace kproxy::chaos
