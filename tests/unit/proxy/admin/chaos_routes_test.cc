// Tests for proxy/admin/chaos_routes.h: the fault-rule and ApiVersions handlers, called directly.
#include "proxy/admin/chaos_routes.h"

#include <doctest/doctest.h>

using kproxy::admin::ChaosAdmin;
using kproxy::chaos::LiveRules;
using nlohmann::json;

TEST_CASE("admin handlers: status codes and JSON bodies; invalid input changes nothing") {
  LiveRules c;
  ChaosAdmin admin(c, [] { return std::string("kproxy.yaml:3:5: faults[0].match.api: unknown API 'X'"); });
  auto r = admin.put_fault("fence", R"({"match":{"api":"InitProducerId"},"action":{"error":"PRODUCER_FENCED"},"trigger":"once"})");
  CHECK(r.status == 200);
  CHECK(json::parse(r.body)["rule"]["notes"].size() == 1);
  CHECK(admin.put_fault("fence2", "{not json").status == 400);
  auto bad = admin.put_fault("fence3", R"({"match":{"api":"InitProducerId"},"action":{"error":"NOPE"}})");
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body)["error"].get<std::string>().rfind("action.error", 0) == 0);
  CHECK(admin.put_fault("x", R"({"name":"y","action":{"drop_response":true}})").status == 400);
  auto list = json::parse(admin.list_faults().body);
  CHECK(list["faults"].size() == 1);
  CHECK(list["faults"][0]["hits"] == 0);
  CHECK(admin.get_fault("fence").status == 200);
  CHECK(admin.get_fault("nope").status == 404);
  CHECK(admin.put_api_versions(R"([{"api":"Produce","max":9}])").status == 200);
  CHECK(json::parse(admin.get_api_versions().body)["api_versions"][0]["max"] == 9);
  CHECK(admin.put_api_versions(R"([{"api":"Produce","max":-1}])").status == 400);
  CHECK(json::parse(admin.get_api_versions().body)["api_versions"][0]["max"] == 9);
  CHECK(admin.reload().status == 400);
  CHECK(admin.delete_fault("fence").status == 204);
  CHECK(admin.delete_fault("fence").status == 404);
  admin.put_fault("a", R"({"action":{"drop_response":true}})");
  CHECK(json::parse(admin.reset_faults().body)["removed"] == 1);
}

TEST_CASE("admin handlers: 400 for what the schema refuses, 422 for what cannot apply to the named APIs") {
  // docs/admin-api.openapi.yaml states the first kind in its schemas; the second depends on each
  // API's versions (the "Unprocessable" response).
  LiveRules c;
  ChaosAdmin admin(c, nullptr);
  auto status = [&](const char* body) { return admin.put_fault("r", body).status; };
  CHECK(status(R"({"action":{"error":"NOT_COORDINATOR"}})") == 400);                                       // no match.api
  CHECK(status(R"({"match":{"api":[]},"action":{"answer":"NOT_COORDINATOR"}})") == 400);                   // empty match.api
  CHECK(status(R"({"match":{"api":"EndTxn"},"action":{"answer":"TRANSACTIONAL_ID_NOT_FOUND"}})") == 400);  // not EndTxn's
  CHECK(status(R"({"match":{"api":"Fetch"},"action":{"error":"TRANSACTION_ABORTABLE"}})") == 400);
  CHECK(status(R"({"match":{"topic":"a[b"},"action":{"delay":1}})") == 400);  // unclosed class
  CHECK(status(R"({"match":{"versions":"40000"},"action":{"delay":1}})") == 400);
  CHECK(status(R"({"match":{"api":"EndTxn","versions":"9-"},"action":{"delay":1}})") == 422);  // EndTxn has 0-5
  CHECK(status(R"({"match":{"versions":"5-3"},"action":{"delay":1}})") == 422);
  CHECK(status(R"({"match":{"versions":{"min":5,"max":3}},"action":{"delay":1}})") == 422);
  CHECK(status(R"({"match":{"api":"Fetch"},"action":{"answer":"NOT_COORDINATOR"}})") == 422);  // no top-level error
  CHECK(c.current()->rules.empty());
  CHECK(status(R"({"match":{"api":"Fetch"},"action":{"error":"NOT_LEADER_OR_FOLLOWER"}})") == 200);
}

TEST_CASE("admin handlers: a scenario is 400 when malformed, 422 when its rules cannot apply, 409 when it clashes") {
  LiveRules c;
  ChaosAdmin admin(c, nullptr);
  std::string applied_error;
  kproxy::admin::ScenarioHooks hooks;
  hooks.apply = [&](std::shared_ptr<const kproxy::chaos::Scenario>) { return applied_error; };
  hooks.current = [] { return std::shared_ptr<const kproxy::chaos::Scenario>(); };
  admin.set_scenario_hooks(hooks);
  CHECK(admin.put_scenario(R"({"scenario":"s","description":""})").status == 400);
  CHECK(admin.put_scenario(R"({"scenario":"s","description":"d","faults":[{"name":"a","action":{"delay":1},"match":{"topic":"["}}]})")
            .status == 400);
  CHECK(admin
            .put_scenario(
                R"({"scenario":"s","description":"d","faults":[{"name":"a","action":{"delay":1}},{"name":"a","action":{"delay":2}}]})")
            .status == 422);
  // Malformed wins over unprocessable when a body holds both.
  CHECK(admin
            .put_scenario(R"({"scenario":"s","description":"d","faults":[{"name":"a","action":{"delay":1},"match":{"versions":"5-3"}},)"
                          R"({"name":"b","action":{"delay":1},"match":{"topic":"["}}]})")
            .status == 400);
  CHECK(admin.put_scenario(R"({"scenario":"s","description":"d","faults":[{"name":"a","action":{"delay":1},"match":{"versions":"5-3"}}]})")
            .status == 422);
  applied_error = "scenario 's': its rule 'a' has the name of a rule of the config";
  CHECK(admin.put_scenario(R"({"scenario":"s","description":"d","faults":[{"name":"a","action":{"delay":1}}]})").status == 409);
  applied_error.clear();
  CHECK(admin.put_scenario(R"({"scenario":"s","description":"d","faults":[{"name":"a","action":{"delay":1}}]})").status == 200);
}

TEST_CASE("PUT /api-versions takes feature entries with scopes; an invalid one keeps the policy") {
  LiveRules c;
  ChaosAdmin admin(c, nullptr);
  auto ok = admin.put_api_versions(R"({"api_versions":[{"feature":"transaction.version","max":1,"client_id":"legacy-*"}]})");
  CHECK(ok.status == 200);
  CHECK(json::parse(ok.body)["api_versions"][0]["feature"] == "transaction.version");
  CHECK(c.current()->api_versions.features.size() == 1);
  auto bad = admin.put_api_versions(R"([{"feature":"transaction.version","min":1}])");
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body)["error"].get<std::string>().rfind("api_versions[0].min: a feature has no min", 0) == 0);
  auto not_list = admin.put_api_versions(R"("transaction.version")");
  CHECK(not_list.status == 400);
  CHECK(json::parse(not_list.body)["error"].get<std::string>().rfind("api_versions: expected a list", 0) == 0);
  CHECK(json::parse(admin.get_api_versions().body)["api_versions"][0]["max"] == 1);
}

TEST_CASE("admin handlers: PUT of a new rule past limits.max_fault_rules is 409, counted and logged as a refusal") {
  LiveRules c;
  size_t cap = 2;
  ChaosAdmin admin(
      c, [] { return std::string(); }, [&] { return cap; });
  kproxy::admin::AdminServer server;
  kproxy::admin::register_chaos_routes(admin, server);
  auto put = [&](const std::string& name) {
    kproxy::admin::HttpRequest r;
    r.method = "PUT";
    r.path = "/faults/" + name;
    r.body = R"({"action":{"drop_response":true}})";
    return server.handle(r);
  };
  CHECK(put("a").status == 200);
  CHECK(put("b").status == 200);
  const auto before = server.refusals(409);
  auto over = put("c");
  CHECK(over.status == 409);
  CHECK(json::parse(over.body)["error"] == "too many fault rules: 2 installed, at most 2 (limits.max_fault_rules); delete some first");
  CHECK(server.refusals(409) == before + 1);
  CHECK(c.current()->rules.size() == 2);
  CHECK(put("b").status == 200);  // replacing is not adding
  cap = 3;                        // the limit is read at each PUT (a reload may change it)
  CHECK(put("c").status == 200);
}

// Found by fuzz_admin_request: nlohmann reports a number too large for a double as out_of_range
// (406), not parse_error, and it escaped the handler as a 500.
TEST_CASE("admin handlers: a number too large for a double in a body is 400, not 500") {
  LiveRules c;
  ChaosAdmin admin(c, [] { return std::string(); });
  auto r = admin.put_fault("x", R"({"name":"x","action":{"delay":1e999999}})");
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].get<std::string>().find("number overflow") != std::string::npos);
  CHECK(admin.put_api_versions("[1e999999]").status == 400);
  CHECK(c.current()->rules.empty());
}
