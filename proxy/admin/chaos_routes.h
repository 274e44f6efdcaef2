// The chaos part of the admin API: the fault-rule and ApiVersions-policy handlers as plain
// functions (request body in, status + JSON out, testable without a server), and
// register_chaos_routes() that puts them on the admin HTTP server.
//
//   GET    /faults            {"faults": [rule + hits + injected + notes, ...]}
//   PUT    /faults/{name}     body: a rule (see proxy/chaos/fault_rule.h); 200 {"rule": ...}; 400 {"error": ...}
//   GET    /faults/{name}     the rule with its counters; 404 when unknown
//   DELETE /faults/{name}     204; 404 when unknown
//   POST   /faults/reset      removes every rule; 200 {"removed": N}
//   GET    /api-versions      {"api_versions": [...]}
//   PUT    /api-versions      body: the list (see proxy/policy/api_versions_policy.h); 400 when invalid
//   POST   /reload            re-reads the config file (listeners unchanged); 400 with the errors
//   GET    /scenario          {"scenario": null} or the applied scenario's summary (proxy/chaos/scenario.h)
//   PUT    /scenario          body: a scenario file (YAML or JSON); applies it on top of the config's
//                             rules and policy, replacing the previous one; 400 file:line:col errors
//   DELETE /scenario          back to the config's rules and policy; 200 {"scenario": null}
// Invalid input changes nothing. Every change applies from the next frame, connections stay open.
#pragma once

#include <functional>
#include <string>

#include "proxy/admin/admin_server.h"
#include "proxy/chaos/rule_set.h"
#include "proxy/chaos/scenario.h"

namespace kproxy::admin {

/// How a scenario is applied and read (the Proxy's set_scenario / scenario, in AdminRuntime).
struct ScenarioHooks {
  std::function<std::string(std::shared_ptr<const chaos::Scenario>)> apply;
  std::function<std::shared_ptr<const chaos::Scenario>()> current;
};

class ChaosAdmin {
 public:
  /// `reload`: re-reads the config; returns "" or the errors. `max_rules`: the current
  /// limits.max_fault_rules (read at each PUT, so a reload that changes it applies); none = no cap.
  ChaosAdmin(chaos::LiveRules& control, std::function<std::string()> reload, std::function<size_t()> max_rules = {})
      : control_(control), reload_(std::move(reload)), max_rules_(std::move(max_rules)) {}

  HttpResponse list_faults() const;
  HttpResponse put_fault(const std::string& name, const std::string& body);
  HttpResponse get_fault(const std::string& name) const;
  HttpResponse delete_fault(const std::string& name);
  HttpResponse reset_faults();
  HttpResponse get_api_versions() const;
  HttpResponse put_api_versions(const std::string& body);
  HttpResponse reload();
  HttpResponse get_scenario() const;
  HttpResponse put_scenario(const std::string& body);
  HttpResponse delete_scenario();
  void set_scenario_hooks(ScenarioHooks hooks) { scenario_ = std::move(hooks); }

 private:
  ScenarioHooks scenario_;
  chaos::LiveRules& control_;
  std::function<std::string()> reload_;
  std::function<size_t()> max_rules_;
};

/// Registers GET/PUT/DELETE /faults..., /api-versions and POST /reload on `server`; `chaos` must
/// outlive the server.
void register_chaos_routes(ChaosAdmin& chaos, AdminServer& server);

}  // namespace kproxy::admin
