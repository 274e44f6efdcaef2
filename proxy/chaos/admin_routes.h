// The chaos part of the admin API, as plain functions (request body in, status + JSON out), and
// their registration on the admin HTTP server (admin_registration.h).
//
//   GET    /faults            {"faults": [rule + hits + injected + notes, ...]}
//   PUT    /faults/{name}     body: a rule (see fault_rule.h); 200 {"rule": ...}; 400 {"error": ...}
//   GET    /faults/{name}     the rule with its counters; 404 when unknown
//   DELETE /faults/{name}     204; 404 when unknown
//   POST   /faults/reset      removes every rule; 200 {"removed": N}
//   GET    /api-versions      {"api_versions": [...]}
//   PUT    /api-versions      body: the list (see api_versions_rewrite.h); 400 when invalid
//   POST   /reload            re-reads the config file (listeners unchanged); 400 with the errors
// Invalid input changes nothing. Every change applies from the next frame, connections stay open.
#pragma once

#include <functional>
#include <string>

#include "proxy/chaos/rule_set.h"

namespace kproxy::chaos {

struct ChaosHttpResponse {
  int status = 200;
  std::string body;  ///< JSON
};

class ChaosAdmin {
 public:
  /// `reload`: re-reads the config; returns "" or the errors.
  ChaosAdmin(ChaosControl& control, std::function<std::string()> reload) : control_(control), reload_(std::move(reload)) {}

  ChaosHttpResponse list_faults() const;
  ChaosHttpResponse put_fault(const std::string& name, const std::string& body);
  ChaosHttpResponse get_fault(const std::string& name) const;
  ChaosHttpResponse delete_fault(const std::string& name);
  ChaosHttpResponse reset_faults();
  ChaosHttpResponse get_api_versions() const;
  ChaosHttpResponse put_api_versions(const std::string& body);
  ChaosHttpResponse reload();

 private:
  ChaosControl& control_;
  std::function<std::string()> reload_;
};

}  // namespace kproxy::chaos
