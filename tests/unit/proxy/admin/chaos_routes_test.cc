// Tests for proxy/admin/chaos_routes.h: the fault-rule and ApiVersions handlers, called directly.
#include "proxy/admin/chaos_routes.h"

#include <doctest/doctest.h>

using kproxy::admin::ChaosAdmin;
using kproxy::chaos::ChaosControl;
using nlohmann::json;

TEST_CASE("admin handlers: status codes and JSON bodies; invalid input changes nothing") {
  ChaosControl c;
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

TEST_CASE("PUT /api-versions takes feature entries with scopes; an invalid one keeps the policy") {
  ChaosControl c;
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

TEST_CASE("admin handlers: PUT of a new rule past limits.max_fault_rules is 400, counted and logged as a refusal") {
  ChaosControl c;
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
  const auto before = kproxy::admin::admin_refusals(400);
  auto over = put("c");
  CHECK(over.status == 400);
  CHECK(json::parse(over.body)["error"] == "too many fault rules: 2 installed, at most 2 (limits.max_fault_rules); delete some first");
  CHECK(kproxy::admin::admin_refusals(400) == before + 1);
  CHECK(c.current()->rules.size() == 2);
  CHECK(put("b").status == 200);  // replacing is not adding
  cap = 3;                        // the limit is read at each PUT (a reload may change it)
  CHECK(put("c").status == 200);
}

// Found by fuzz_admin_request: nlohmann reports a number too large for a double as out_of_range
// (406), not parse_error, and it escaped the handler as a 500.
TEST_CASE("admin handlers: a number too large for a double in a body is 400, not 500") {
  ChaosControl c;
  ChaosAdmin admin(c, [] { return std::string(); });
  auto r = admin.put_fault("x", R"({"name":"x","action":{"delay":1e999999}})");
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].get<std::string>().find("number overflow") != std::string::npos);
  CHECK(admin.put_api_versions("[1e999999]").status == 400);
  CHECK(c.current()->rules.empty());
}
