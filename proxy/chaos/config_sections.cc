#include "proxy/chaos/config_sections.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "proxy/chaos/yaml_number.h"

namespace kproxy::chaos {

namespace {

// YAML → JSON, remembering where each path ("faults[0].match.api") sits in the file.
nlohmann::json to_json(const YAML::Node& n, const std::string& path, std::map<std::string, YAML::Mark>& marks) {
  marks[path] = n.Mark();
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      auto out = nlohmann::json::array();
      for (size_t i = 0; i < n.size(); ++i) out.push_back(to_json(n[i], path + "[" + std::to_string(i) + "]", marks));
      return out;
    }
    case YAML::NodeType::Map: {
      auto out = nlohmann::json::object();
      for (const auto& kv : n) {
        std::string key = kv.first.as<std::string>("");
        std::string sub = path.empty() ? key : path + "." + key;
        marks[sub] = kv.first.Mark();
        out[key] = to_json(kv.second, sub, marks);
        marks[sub] = kv.first.Mark();
      }
      return out;
    }
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: a string
      if (s == "true") return true;
      if (s == "false") return false;
      if (s == "null" || s == "~") return nullptr;
      try {
        size_t used = 0;
        long long v = std::stoll(s, &used);
        if (used == s.size()) return v;
      } catch (...) {
      }
      if (auto d = yaml_number(s)) return *d;
      return s;
    }
    default: return nullptr;
  }
}

// "faults[0].match.api: why" → "file:line:col: faults[0].match.api: why" using the nearest known path.
std::string locate(const std::string& source, const std::string& message, const std::map<std::string, YAML::Mark>& marks) {
  std::string path = message.substr(0, message.find(": "));
  while (true) {
    auto it = marks.find(path);
    if (it != marks.end() && !it->second.is_null())
      return source + ":" + std::to_string(it->second.line + 1) + ":" + std::to_string(it->second.column + 1) + ": " + message;
    auto cut = path.find_last_of(".[");
    if (cut == std::string::npos || cut == 0) break;
    path = path.substr(0, cut);
  }
  return source + ": " + message;
}

std::string load_root(const YAML::Node& root, const std::string& source, ChaosConfig& out, Refusal& worst) {
  std::string errors;
  std::map<std::string, YAML::Mark> marks;
  if (!root.IsMap()) return "";
  if (auto faults = root["faults"]; faults && !faults.IsNull()) {
    auto list = to_json(faults, "faults", marks);
    if (!list.is_array()) {
      errors += locate(source, "faults: expected a list of rules", marks) + "\n";
      note_refusal(worst, Refusal::kMalformed);
    } else {
      std::set<std::string> names;
      for (size_t i = 0; i < list.size(); ++i) {
        std::string at = "faults[" + std::to_string(i) + "]";
        std::string why;
        Refusal kind = Refusal::kNone;
        auto rule = parse_fault_rule(list[i], why, {}, &kind);
        if (!rule) {
          note_refusal(worst, kind);
          errors += locate(source, at + (why.rfind(":", 0) == 0 ? "" : ".") + why, marks) + "\n";
          continue;
        }
        if (!names.insert(rule->name).second) {
          errors += locate(source, at + ".name: '" + rule->name + "' is used by an earlier rule", marks) + "\n";
          note_refusal(worst, Refusal::kUnprocessable);  // JSON Schema cannot say "names differ"
          continue;
        }
        out.rules.push_back(std::move(rule));
      }
    }
  }
  if (auto av = root["api_versions"]; av && !av.IsNull()) {
    auto list = to_json(av, "api_versions", marks);
    std::string why;
    bool unprocessable = false;
    auto parsed = policy::parse_api_versions_policy(list, why, &unprocessable);
    if (!parsed) {
      errors += locate(source, "api_versions" + why, marks) + "\n";
      note_refusal(worst, unprocessable ? Refusal::kUnprocessable : Refusal::kMalformed);
    } else {
      out.api_versions = std::move(*parsed);
    }
  }
  return errors;
}

}  // namespace

std::string load_chaos_yaml(const std::string& yaml, const std::string& source, ChaosConfig& out, Refusal* refusal) {
  Refusal worst = Refusal::kNone;
  std::string errors;
  try {
    errors = load_root(YAML::Load(yaml), source, out, worst);
  } catch (const YAML::Exception& e) {
    errors = source + ": " + e.what() + "\n";
    worst = Refusal::kMalformed;
  }
  if (refusal) *refusal = worst;
  return errors;
}

std::string load_chaos_config(const config::Config& config, ChaosConfig& out) {
  std::string errors;
  std::ifstream in(config.source);
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    errors = load_chaos_yaml(text.str(), config.source, out);
  } else {
    // No file (e.g. a config built in a test): the kept sections, positions relative to them.
    std::string yaml;
    if (!config.faults.yaml.empty()) yaml += "faults:\n" + config.faults.yaml + "\n";
    if (!config.api_versions.yaml.empty()) yaml += "api_versions:\n" + config.api_versions.yaml + "\n";
    errors = load_chaos_yaml(yaml, config.source.empty() ? "<config>" : config.source, out);
  }
  if (out.rules.size() > config.limits.max_fault_rules) {
    errors += (config.source.empty() ? std::string("<config>") : config.source) + ":" + std::to_string(std::max(config.faults.line, 1)) +
              ":1: faults: " + std::to_string(out.rules.size()) + " rules, more than limits.max_fault_rules (" +
              std::to_string(config.limits.max_fault_rules) + ")\n";
  }
  return errors;
}

}  // namespace kproxy::chaos
