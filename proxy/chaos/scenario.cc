#include "proxy/chaos/scenario.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "proxy/chaos/yaml_number.h"
#include "proxy/util/utf8.h"

namespace kproxy::chaos {

namespace {
constexpr const char* kKeys = "scenario, version, number, description, protocols, expect, workload, notes, faults, api_versions";

std::string at(const std::string& source, const YAML::Node& n, const std::string& message) {
  YAML::Mark m = n.Mark();
  if (m.is_null()) return source + ": " + message + "\n";
  return source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) + ": " + message + "\n";
}

/// 1 to 128 letters, digits, '.', '_' or '-'.
bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

/// A whole number in [lo, hi] (3 and 3.0 alike, as JSON Schema reads an integer); not a quoted one.
bool read_int(const YAML::Node& n, int lo, int hi, int& out) {
  if (!n.IsScalar() || n.Tag() == "!") return false;
  auto v = yaml_number(n.Scalar());
  if (!v || *v != std::floor(*v) || *v < lo || *v > hi) return false;
  out = static_cast<int>(*v);
  return true;
}

/// Text: a quoted scalar, or a plain one that YAML does not read as a boolean, null or number
/// (JSON's false, null and 7 are not text).
bool is_text(const YAML::Node& n) {
  if (!n.IsScalar()) return false;
  if (n.Tag() == "!") return true;
  const std::string& s = n.Scalar();
  static const std::set<std::string> kNotText = {"true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL", "~", ""};
  if (kNotText.count(s)) return false;
  return !yaml_number(s);
}

}  // namespace

nlohmann::json Scenario::summary() const {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& r : chaos.rules) rules.push_back(r->name);
  nlohmann::json out = {{"scenario", name},
                        {"version", version},
                        {"description", description},
                        {"protocols", protocols},
                        {"expect", expect},
                        {"source", source},
                        {"rules", rules},
                        {"api_versions", chaos.api_versions.spec}};
  if (number != 0) out["number"] = number;
  if (!workload.is_null()) out["workload"] = workload;
  return out;
}

std::string load_scenario_yaml(const std::string& yaml, const std::string& source, Scenario& out, Refusal* refusal) {
  if (refusal) *refusal = Refusal::kMalformed;  // until the rules are read: every refusal before is one the schema makes
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    // JSON is YAML, but yaml-cpp refuses some JSON escapes (a \uD83D\uDE00 surrogate pair): a body
    // that is JSON is read again from nlohmann's UTF-8 text of it (positions are then that text's).
    auto json = nlohmann::json::parse(yaml, nullptr, false);
    if (json.is_discarded()) return source + ": " + e.what() + "\n";
    std::string text = json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text == yaml) return source + ": " + e.what() + "\n";  // read as JSON already
    return load_scenario_yaml(text, source, out, refusal);
  }
  if (!root.IsMap()) return source + ": a scenario is a mapping (scenario:, description:, faults:, ...)\n";
  std::string errors;
  for (const auto& kv : root) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    static const std::set<std::string> known = {"scenario", "version",  "number", "description", "protocols",
                                                "expect",   "workload", "notes",  "faults",      "api_versions"};
    if (!known.count(key)) errors += at(source, kv.first, key + ": unknown key (expected " + kKeys + ")");
  }
  if (auto n = root["scenario"]; !n) {
    errors += source + ": scenario: missing (the scenario's name, e.g. 03-concurrent-transactions-endtxn)\n";
  } else if (!is_text(n) || !valid_name(n.Scalar())) {
    errors += at(source, n, "scenario: a name of 1 to 128 letters, digits, '.', '_' or '-'");
  } else {
    out.name = n.Scalar();
  }
  if (auto n = root["version"]; n && !read_int(n, 1, 1000000, out.version)) errors += at(source, n, "version: a whole number >= 1");
  if (auto n = root["number"]; n && !read_int(n, 1, 16, out.number))
    errors += at(source, n, "number: the scenario's number in docs/faults.md, 1 to 16");
  if (auto n = root["description"]; !n) {
    errors += source + ": description: missing (one line: what fails, and how)\n";
  } else if (!is_text(n) || n.Scalar().empty() || util::code_points(n.Scalar()) > 1000) {
    errors += at(source, n, "description: one line of text (1 to 1000 characters)");
  } else {
    out.description = n.Scalar();
  }
  if (auto n = root["protocols"]; n) {
    out.protocols.clear();
    bool ok = n.IsSequence() && n.size() > 0;
    for (size_t i = 0; ok && i < n.size(); ++i) {
      int p = 0;
      ok = read_int(n[i], 1, 2, p);
      if (ok) out.protocols.push_back(p);
    }
    if (!ok) errors += at(source, n, "protocols: a non-empty list of transaction.version levels, 1 and/or 2");
  }
  if (auto n = root["expect"]; n) {
    if (!is_text(n) || (n.Scalar() != "exact" && n.Scalar() != "exact-or-gave-up" && n.Scalar() != "gave-up")) {
      errors += at(source, n, "expect: exact, exact-or-gave-up or gave-up (what a correct client does)");
    } else {
      out.expect = n.Scalar();
    }
  }
  if (auto n = root["workload"]; n) {
    if (is_text(n)) {
      out.workload = n.Scalar();
    } else if (n.IsMap()) {
      out.workload = nlohmann::json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
          errors += at(source, kv.first, "workload: settings are key: value pairs (e.g. cell_timeout_s: 150)");
          break;
        }
        out.workload[kv.first.Scalar()] = kv.second.Scalar();
      }
    } else {
      errors += at(source, n, "workload: a word (producer, ctp, admin, none) or key: value settings for the runner");
    }
  }
  if (auto n = root["notes"]; n && !is_text(n))
    errors += at(source, n, "notes: text (quote it if YAML reads it as a number or true/false)");
  for (const char* list : {"faults", "api_versions"}) {
    if (auto n = root[list]; n && !n.IsSequence()) errors += at(source, n, std::string(list) + ": expected a list (an empty one: [])");
  }
  // Neither faults: nor api_versions: is a baseline scenario: the same workload with nothing injected.
  if (errors.empty()) errors += load_chaos_yaml(yaml, source, out.chaos, refusal);
  out.source = source;
  return errors;
}

std::string load_scenario_file(const std::string& path, Scenario& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + ": cannot read the scenario file\n";
  std::stringstream text;
  text << in.rdbuf();
  return load_scenario_yaml(text.str(), path, out);
}

std::string apply_scenario(ChaosConfig& base, const Scenario& scenario, size_t max_rules) {
  std::set<std::string> names;
  for (const auto& r : base.rules) names.insert(r->name);
  for (const auto& r : scenario.chaos.rules) {
    if (names.count(r->name)) return "scenario '" + scenario.name + "': its rule '" + r->name + "' has the name of a rule of the config";
  }
  if (base.rules.size() + scenario.chaos.rules.size() > max_rules) {
    return "scenario '" + scenario.name + "': " + std::to_string(base.rules.size() + scenario.chaos.rules.size()) +
           " rules with the config's, more than limits.max_fault_rules (" + std::to_string(max_rules) + ")";
  }
  for (const auto& r : scenario.chaos.rules) base.rules.push_back(r);
  const auto& s = scenario.chaos.api_versions;
  auto& p = base.api_versions;
  p.apis.insert(p.apis.begin(), s.apis.begin(), s.apis.end());
  p.features.insert(p.features.begin(), s.features.begin(), s.features.end());
  nlohmann::json spec = s.spec.is_array() ? s.spec : nlohmann::json::array();
  if (p.spec.is_array()) {
    for (const auto& e : p.spec) spec.push_back(e);
  }
  p.spec = std::move(spec);
  return "";
}

}  // namespace kproxy::chaos
