// The `faults:` and `api_versions:` sections of the config file, parsed into rules with
// file:line:column errors.
//
// The config loader (config/) keeps both sections as YAML; this reads them again from the config
// file so that each error points at the offending key in the file, e.g.
//   kproxy.yaml:14:15: faults[0].match.api: unknown API 'EndTxnn' (use Kafka's name, e.g. EndTxn)
// YAML values become JSON the obvious way (quoted scalars stay strings), so a rule in the config
// is written exactly as in the admin API.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "proxy/chaos/fault_rule.h"
#include "proxy/policy/api_versions_policy.h"

namespace kproxy::chaos {

struct ChaosConfig {
  std::vector<std::shared_ptr<FaultRule>> rules;
  policy::ApiVersionsPolicy api_versions;
};

/// Parses the sections of `config` (from its source file when readable, else from the kept YAML).
/// Returns "" or the errors (one per line).
std::string load_chaos_config(const config::Config& config, ChaosConfig& out);

/// Parses YAML text holding `faults:` and/or `api_versions:` at the top level. `source` names it
/// in messages. Returns "" or the errors; `refusal`, when given, gets their kind.
std::string load_chaos_yaml(const std::string& yaml, const std::string& source, ChaosConfig& out, Refusal* refusal = nullptr);

}  // namespace kproxy::chaos
