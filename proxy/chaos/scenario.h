// Scenario: a named, versioned fault scenario in a file of its own (scenarios/*.yaml): the fault
// rules and ApiVersions policy of one failure a transactional client must survive
// (docs/faults.md "Scenarios"), with what it is and what a correct client does.
//
//   scenario: 03-concurrent-transactions-endtxn   # its name: letters, digits, '.', '_', '-'
//   version: 1                                    # bumped when the faults change
//   number: 3                                     # docs/faults.md scenario number (1-16)
//   description: "EndTxn answered CONCURRENT_TRANSACTIONS twice"
//   protocols: [1, 2]                             # transaction.version(s) it applies to
//   expect: exact                                 # exact | exact-or-gave-up | gave-up
//   workload: producer                            # optional: what shows it (producer, ctp, admin, none),
//                                                 # or settings for the runner ({cell_timeout_s: 150})
//   faults: [...]                                 # the config's faults: grammar
//   api_versions: [...]                           # the config's api_versions: grammar
//
// Neither faults: nor api_versions: makes a baseline: the same workload, nothing injected.
// kproxy applies one scenario at a time on top of the config's own rules and policy
// (`kproxy --config C --scenario S`, PUT /scenario, `kproxy ctl scenario apply S`): its rules are
// added to the config's, its ApiVersions entries come before the config's (the first entry that
// matches applies). Errors carry file:line:column like the config's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "proxy/chaos/config_sections.h"

namespace kproxy::chaos {

struct Scenario {
  std::string name;
  int version = 1;
  int number = 0;  ///< 0: not given
  std::string description;
  std::vector<int> protocols{1, 2};
  std::string expect = "exact";
  nlohmann::json workload;  ///< null, a word, or the runner's settings (an object of scalars)
  std::string source;       ///< the file it came from ("PUT /scenario" over the admin API)
  ChaosConfig chaos;
  /// What GET /scenario shows: the metadata and the rule names.
  nlohmann::json summary() const;
};

/// Parses scenario YAML (JSON is YAML too). Returns "" or the errors, one per line, each
/// "source:line:column: key: why". `refusal`, when given, gets the errors' kind (kNone when none).
std::string load_scenario_yaml(const std::string& yaml, const std::string& source, Scenario& out, Refusal* refusal = nullptr);
/// Reads and parses `path`. Returns "" or the errors.
std::string load_scenario_file(const std::string& path, Scenario& out);

/// `base` (the config's rules and policy) with `scenario` applied on top: its rules after the
/// config's, its ApiVersions entries first. "" or why not (a scenario rule named like a config
/// rule, or more rules than `max_rules`).
std::string apply_scenario(ChaosConfig& base, const Scenario& scenario, size_t max_rules);

}  // namespace kproxy::chaos
