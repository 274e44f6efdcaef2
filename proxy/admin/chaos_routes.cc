#include "proxy/admin/chaos_routes.h"

namespace kproxy::admin {

namespace {
/// JSON text of `j`; strings that are not UTF-8 (a rule name from a path, a YAML config's value)
/// have their bad bytes replaced instead of throwing (which would be a 500).
std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

HttpResponse json_response(int status, std::string body) { return HttpResponse{status, "application/json", std::move(body)}; }

HttpResponse error(int status, const std::string& message) { return json_error(status, message); }

/// The status of a refused rule change (docs/admin-api.openapi.yaml, "Refusals").
int status_of(chaos::Refusal refusal) {
  switch (refusal) {
    case chaos::Refusal::kUnprocessable: return 422;
    case chaos::Refusal::kConflict: return 409;
    default: return 400;
  }
}

bool parse_body(const std::string& body, nlohmann::json& out, std::string& why) {
  // The depth is bounded before parsing: copying, comparing and dumping a json value recurse.
  if (json_too_deep(body)) {
    why = "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    return false;
  }
  try {
    out = nlohmann::json::parse(body);
    return true;
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number no double holds (1e999999): both are the
    // client's bad input, never a 500 (found by tests/fuzz/admin_request_fuzzer.cc).
    why = std::string("malformed JSON: ") + e.what();
    return false;
  }
}
}  // namespace

HttpResponse ChaosAdmin::list_faults() const {
  auto set = control_.current();
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : set->rules) list.push_back(r->to_json());
  return json_response(200, dump(nlohmann::json{{"faults", list}}));
}

HttpResponse ChaosAdmin::put_fault(const std::string& name, const std::string& body) {
  nlohmann::json spec;
  std::string why;
  if (!parse_body(body, spec, why)) return error(400, why);
  if (spec.is_object() && spec.contains("name") && spec["name"] != name)
    return error(400, "name: the body names " + dump(spec["name"]) + " but the path names '" + name + "'");
  chaos::Refusal refusal = chaos::Refusal::kNone;
  if (auto e = control_.put_rule(name, spec, max_rules_ ? max_rules_() : SIZE_MAX, &refusal); !e.empty())
    return error(status_of(refusal), e);
  auto rule = control_.rule(name);
  return json_response(200, dump(nlohmann::json{{"rule", rule ? rule->to_json() : nlohmann::json()}}));
}

HttpResponse ChaosAdmin::get_fault(const std::string& name) const {
  auto rule = control_.rule(name);
  if (!rule) return error(404, "no fault rule named '" + name + "'");
  return json_response(200, dump(rule->to_json()));
}

HttpResponse ChaosAdmin::delete_fault(const std::string& name) {
  if (!control_.delete_rule(name)) return error(404, "no fault rule named '" + name + "'");
  return json_response(204, "");
}

HttpResponse ChaosAdmin::reset_faults() {
  size_t n = control_.current()->rules.size();
  control_.reset_rules();
  return json_response(200, dump(nlohmann::json{{"removed", n}}));
}

HttpResponse ChaosAdmin::get_api_versions() const {
  return json_response(200, dump(nlohmann::json{{"api_versions", control_.current()->api_versions.spec}}));
}

HttpResponse ChaosAdmin::put_api_versions(const std::string& body) {
  nlohmann::json list;
  std::string why;
  if (!parse_body(body, list, why)) return error(400, why);
  if (list.is_object()) {
    if (list.size() != 1 || !list.contains("api_versions"))
      return error(400, "api_versions: expected a list, null or {\"api_versions\": list}");
    nlohmann::json inner = std::move(list["api_versions"]);
    list = std::move(inner);
  }
  bool unprocessable = false;
  if (auto e = control_.set_api_versions(list, &unprocessable); !e.empty()) return error(unprocessable ? 422 : 400, "api_versions" + e);
  return get_api_versions();
}

HttpResponse ChaosAdmin::reload() {
  if (!reload_) return error(400, "reload is not available (no config file)");
  if (auto e = reload_(); !e.empty()) return error(400, e);
  return json_response(200, R"({"reloaded":true})");
}

HttpResponse ChaosAdmin::get_scenario() const {
  auto s = scenario_.current ? scenario_.current() : nullptr;
  return json_response(200, dump(s ? s->summary() : nlohmann::json{{"scenario", nullptr}}) + "\n");
}

HttpResponse ChaosAdmin::put_scenario(const std::string& body) {
  if (!scenario_.apply) return error(400, "scenarios are not available here");
  if (json_too_deep(body)) return error(400, "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  auto s = std::make_shared<chaos::Scenario>();
  chaos::Refusal refusal = chaos::Refusal::kNone;
  if (std::string e = chaos::load_scenario_yaml(body, "PUT /scenario", *s, &refusal); !e.empty()) {
    while (!e.empty() && e.back() == '\n') e.pop_back();
    return error(status_of(refusal), e);
  }
  // What apply refuses is a clash with what is installed (rule names, limits.max_fault_rules).
  if (std::string e = scenario_.apply(s); !e.empty()) return error(409, e);
  return json_response(200, dump(s->summary()) + "\n");
}

HttpResponse ChaosAdmin::delete_scenario() {
  if (!scenario_.apply) return error(400, "scenarios are not available here");
  if (std::string e = scenario_.apply(nullptr); !e.empty()) return error(400, e);
  return json_response(200, R"({"scenario":null})"
                            "\n");
}

void register_chaos_routes(ChaosAdmin& chaos, AdminServer& server) {
  server.route("GET", "/scenario", [&chaos](const HttpRequest&) { return chaos.get_scenario(); });
  server.route("PUT", "/scenario", [&chaos](const HttpRequest& r) { return chaos.put_scenario(r.body); });
  server.route("DELETE", "/scenario", [&chaos](const HttpRequest&) { return chaos.delete_scenario(); });
  server.route("GET", "/faults", [&chaos](const HttpRequest&) { return chaos.list_faults(); });
  server.route("PUT", "/faults/{name}", [&chaos](const HttpRequest& r) { return chaos.put_fault(r.path_params.at("name"), r.body); });
  server.route("GET", "/faults/{name}", [&chaos](const HttpRequest& r) { return chaos.get_fault(r.path_params.at("name")); });
  server.route("DELETE", "/faults/{name}", [&chaos](const HttpRequest& r) { return chaos.delete_fault(r.path_params.at("name")); });
  server.route("POST", "/faults/reset", [&chaos](const HttpRequest&) { return chaos.reset_faults(); });
  server.route("GET", "/api-versions", [&chaos](const HttpRequest&) { return chaos.get_api_versions(); });
  server.route("PUT", "/api-versions", [&chaos](const HttpRequest& r) { return chaos.put_api_versions(r.body); });
  server.route("POST", "/reload", [&chaos](const HttpRequest&) { return chaos.reload(); });
}

}  // namespace kproxy::admin
