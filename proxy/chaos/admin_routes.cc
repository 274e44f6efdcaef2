#include "proxy/chaos/admin_routes.h"

namespace kproxy::chaos {

namespace {
ChaosHttpResponse error(int status, const std::string& message) { return {status, nlohmann::json{{"error", message}}.dump()}; }

bool parse_body(const std::string& body, nlohmann::json& out, std::string& why) {
  try {
    out = nlohmann::json::parse(body);
    return true;
  } catch (const nlohmann::json::parse_error& e) {
    why = std::string("malformed JSON: ") + e.what();
    return false;
  }
}
}  // namespace

ChaosHttpResponse ChaosAdmin::list_faults() const {
  auto set = control_.current();
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : set->rules) list.push_back(r->to_json());
  return {200, nlohmann::json{{"faults", list}}.dump()};
}

ChaosHttpResponse ChaosAdmin::put_fault(const std::string& name, const std::string& body) {
  nlohmann::json spec;
  std::string why;
  if (!parse_body(body, spec, why)) return error(400, why);
  if (spec.is_object() && spec.contains("name") && spec["name"] != name)
    return error(400, "name: the body names '" + spec["name"].dump() + "' but the path names '" + name + "'");
  if (auto e = control_.put_rule(name, spec); !e.empty()) return error(400, e);
  auto rule = control_.rule(name);
  return {200, nlohmann::json{{"rule", rule ? rule->to_json() : nlohmann::json()}}.dump()};
}

ChaosHttpResponse ChaosAdmin::get_fault(const std::string& name) const {
  auto rule = control_.rule(name);
  if (!rule) return error(404, "no fault rule named '" + name + "'");
  return {200, rule->to_json().dump()};
}

ChaosHttpResponse ChaosAdmin::delete_fault(const std::string& name) {
  if (!control_.delete_rule(name)) return error(404, "no fault rule named '" + name + "'");
  return {204, ""};
}

ChaosHttpResponse ChaosAdmin::reset_faults() {
  size_t n = control_.current()->rules.size();
  control_.reset_rules();
  return {200, nlohmann::json{{"removed", n}}.dump()};
}

ChaosHttpResponse ChaosAdmin::get_api_versions() const {
  return {200, nlohmann::json{{"api_versions", control_.current()->api_versions.spec}}.dump()};
}

ChaosHttpResponse ChaosAdmin::put_api_versions(const std::string& body) {
  nlohmann::json list;
  std::string why;
  if (!parse_body(body, list, why)) return error(400, why);
  if (list.is_object() && list.contains("api_versions")) list = list["api_versions"];
  if (auto e = control_.set_api_versions(list); !e.empty()) return error(400, "api_versions" + e);
  return get_api_versions();
}

ChaosHttpResponse ChaosAdmin::reload() {
  if (!reload_) return error(400, "reload is not available (no config file)");
  if (auto e = reload_(); !e.empty()) return error(400, e);
  return {200, R"({"reloaded":true})"};
}

}  // namespace kproxy::chaos
