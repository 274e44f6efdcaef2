#include "proxy/chaos/rule_set.h"

#include <spdlog/spdlog.h>

#include "codec/generated/api_keys.h"

namespace kproxy::chaos {

void RuleSet::index() {
  api_has_rules.fill(false);
  any_api_rules = false;
  for (const auto& r : rules) {
    if (r->match.apis.empty()) any_api_rules = true;
    for (int16_t k : r->match.apis) {
      if (k >= 0 && k < kApiSlots) api_has_rules[static_cast<size_t>(k)] = true;
    }
  }
}

LiveRules::LiveRules(const util::Clock& clock) : clock_(clock), current_(std::make_shared<RuleSet>()) {}

std::shared_ptr<const RuleSet> LiveRules::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

void LiveRules::publish(std::shared_ptr<RuleSet> next) {
  next->index();
  current_ = std::move(next);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

std::string LiveRules::put_rule(const std::string& name, const nlohmann::json& spec, size_t max_rules, Refusal* refusal) {
  std::string error;
  auto rule = parse_fault_rule(spec, error, name, refusal);
  if (!rule) return error;
  rule->installed_at = clock_.now();
  std::lock_guard lock(mutex_);
  auto next = std::make_shared<RuleSet>(*current_);
  bool replaced = false;
  for (auto& r : next->rules) {
    if (r->name != name) continue;
    if (r->spec == rule->spec) return "";  // unchanged: keep counters and window start
    r = rule;
    replaced = true;
  }
  if (!replaced) {
    if (next->rules.size() >= max_rules) {
      if (refusal) *refusal = Refusal::kConflict;
      return "too many fault rules: " + std::to_string(next->rules.size()) + " installed, at most " + std::to_string(max_rules) +
             " (limits.max_fault_rules); delete some first";
    }
    next->rules.push_back(rule);
  }
  publish(std::move(next));
  return "";
}

bool LiveRules::delete_rule(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto next = std::make_shared<RuleSet>(*current_);
  auto before = next->rules.size();
  std::erase_if(next->rules, [&](const auto& r) { return r->name == name; });
  if (next->rules.size() == before) return false;
  publish(std::move(next));
  return true;
}

void LiveRules::reset_rules() {
  std::lock_guard lock(mutex_);
  auto next = std::make_shared<RuleSet>(*current_);
  next->rules.clear();
  publish(std::move(next));
}

std::string LiveRules::set_api_versions(const nlohmann::json& list, bool* unprocessable) {
  std::string error;
  auto parsed = policy::parse_api_versions_policy(list, error, unprocessable);
  if (!parsed) return error;
  for (const auto& line : parsed->shadowed) spdlog::warn("api_versions{}", line);
  std::lock_guard lock(mutex_);
  auto next = std::make_shared<RuleSet>(*current_);
  next->api_versions = std::move(*parsed);
  publish(std::move(next));
  return "";
}

void LiveRules::replace(std::vector<std::shared_ptr<FaultRule>> rules, policy::ApiVersionsPolicy api_versions) {
  for (const auto& line : api_versions.shadowed) spdlog::warn("api_versions{}", line);
  std::lock_guard lock(mutex_);
  auto next = std::make_shared<RuleSet>();
  const auto now = clock_.now();
  for (auto& r : rules) {
    r->installed_at = now;
    for (const auto& old : current_->rules) {
      if (old->name == r->name && old->spec == r->spec) {
        r->stats = old->stats;  // unchanged rule: its counters survive the reload
        r->installed_at = old->installed_at;
      }
    }
    next->rules.push_back(std::move(r));
  }
  next->api_versions = std::move(api_versions);
  publish(std::move(next));
}

std::shared_ptr<const FaultRule> LiveRules::rule(const std::string& name) const {
  auto set = current();
  for (const auto& r : set->rules) {
    if (r->name == name) return r;
  }
  return nullptr;
}

std::vector<RuleCounters> LiveRules::counters() const {
  auto set = current();
  std::vector<RuleCounters> out;
  for (const auto& r : set->rules) {
    RuleCounters c;
    c.rule = r->name;
    for (int16_t k : r->match.apis) c.apis.push_back(codec::api_name(k));
    c.action = action_name(r->action.kind);
    c.hits = r->stats->hits.load(std::memory_order_relaxed);
    c.injected = r->stats->injected.load(std::memory_order_relaxed);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace kproxy::chaos
