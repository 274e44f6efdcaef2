#include "proxy/toxiproxy/toxiproxy_routes.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "tests/unit/support/test_ports.h"

using namespace kproxy;
using namespace kproxy::toxiproxy;

namespace {

admin::HttpResponse call(const admin::AdminServer& server, const char* method, const std::string& path, std::string body = "") {
  admin::HttpRequest r;
  r.method = method;
  r.path = path;
  r.body = std::move(body);
  return server.handle(std::move(r));
}

nlohmann::json json_of(const admin::HttpResponse& r) { return nlohmann::json::parse(r.body); }

}  // namespace

TEST_CASE("every Toxiproxy v2 endpoint is routed, with its status codes") {
  ProxyTable table(ProxyHost{});
  admin::AdminServer server;
  register_toxiproxy_routes(server, table, "kproxy test");

  auto version = call(server, "GET", "/version");
  CHECK(version.status == 200);
  CHECK(json_of(version)["version"] == "kproxy test");

  CHECK(json_of(call(server, "GET", "/proxies")).empty());
  auto created = call(server, "POST", "/proxies", R"({"name": "k", "listen": "127.0.0.1:7000", "upstream": "127.0.0.1:9092"})");
  CHECK(created.status == 201);
  CHECK(json_of(created)["listen"] == "127.0.0.1:7000");  // the host has no open(): the address as given
  CHECK(call(server, "GET", "/proxies/k").status == 200);
  CHECK(json_of(call(server, "GET", "/proxies"))["k"]["upstream"] == "127.0.0.1:9092");
  CHECK(json_of(call(server, "PATCH", "/proxies/k", R"({"enabled": false})"))["enabled"] == false);
  CHECK(json_of(call(server, "POST", "/proxies/k", R"({"enabled": true})"))["enabled"] == true);  // the older verb

  auto toxic = call(server, "POST", "/proxies/k/toxics", R"({"type": "latency", "attributes": {"latency": 10}})");
  CHECK(toxic.status == 200);
  CHECK(json_of(toxic)["name"] == "latency_downstream");
  CHECK(json_of(call(server, "GET", "/proxies/k/toxics")).size() == 1);
  CHECK(json_of(call(server, "GET", "/proxies/k/toxics/latency_downstream"))["attributes"]["latency"] == 10);
  CHECK(json_of(call(server, "PATCH", "/proxies/k/toxics/latency_downstream",
                     R"({"attributes": {"latency": 20}})"))["attributes"]["latency"] == 20);
  CHECK(json_of(call(server, "POST", "/proxies/k/toxics/latency_downstream",
                     R"({"attributes": {"latency": 30}})"))["attributes"]["latency"] == 30);
  auto removed = call(server, "DELETE", "/proxies/k/toxics/latency_downstream");
  CHECK(removed.status == 204);
  CHECK(removed.body.empty());
  auto missing = call(server, "DELETE", "/proxies/k/toxics/latency_downstream");
  CHECK(missing.status == 404);
  CHECK(json_of(missing)["status"] == 404);

  auto populated = call(server, "POST", "/populate", R"([{"name": "r", "listen": "127.0.0.1:7001", "upstream": "127.0.0.1:6379"}])");
  CHECK(populated.status == 201);
  CHECK(json_of(populated)["proxies"][0]["name"] == "r");
  CHECK(call(server, "POST", "/reset").status == 204);
  CHECK(call(server, "DELETE", "/proxies/r").status == 204);
  CHECK(call(server, "GET", "/proxies/r").status == 404);
  CHECK(json_of(call(server, "POST", "/proxies", "{")) ==
        nlohmann::json::parse(R"({"error": "bad request body: not JSON", "status": 400})"));
}

TEST_CASE("answers become HTTP responses: JSON with a newline, 204 without a body") {
  auto ok = to_http({200, nlohmann::ordered_json{{"a", 1}}});
  CHECK(ok.status == 200);
  CHECK(ok.content_type == "application/json");
  CHECK(ok.body == "{\"a\":1}\n");
  auto none = to_http({204, nullptr});
  CHECK(none.status == 204);
  CHECK(none.body.empty());
}

TEST_CASE("routes of a proxy or toxic that does not exist answer 404 in Toxiproxy's error shape; other verbs 405") {
  ProxyTable table(ProxyHost{});
  admin::AdminServer server;
  register_toxiproxy_routes(server, table, "v");
  for (auto [method, path] :
       {std::pair{"GET", "/proxies/none"}, std::pair{"DELETE", "/proxies/none"}, std::pair{"GET", "/proxies/none/toxics"},
        std::pair{"GET", "/proxies/none/toxics/t"}, std::pair{"DELETE", "/proxies/none/toxics/t"}}) {
    auto r = call(server, method, path);
    CHECK_MESSAGE(r.status == 404, method, " ", path);
    auto body = nlohmann::json::parse(r.body, nullptr, false);
    CHECK_MESSAGE(body["status"] == 404, method, " ", path);
    CHECK_MESSAGE(body["error"].is_string(), method, " ", path);
  }
  CHECK(call(server, "PATCH", "/proxies/none", R"({"enabled": false})").status == 404);
  CHECK(call(server, "POST", "/proxies/none/toxics", R"({"type": "latency", "attributes": {"latency": 1}})").status == 404);
  CHECK(call(server, "PUT", "/proxies").status == 405);
  CHECK(call(server, "DELETE", "/version").status == 405);
  CHECK(call(server, "GET", "/nothing").status == 404);
}

TEST_CASE("GET /openapi.json serves this API's contract; /version says Toxiproxy's content type") {
  ProxyTable table(ProxyHost{});
  admin::AdminServer server;
  register_toxiproxy_routes(server, table, "2.12.0-kproxy");
  auto doc = call(server, "GET", "/openapi.json");
  CHECK(doc.status == 200);
  auto json = nlohmann::json::parse(doc.body, nullptr, false);
  REQUIRE_FALSE(json.is_discarded());
  CHECK(json.contains("openapi"));
  for (const char* path :
       {"/version", "/proxies", "/populate", "/reset", "/proxies/{proxy}", "/proxies/{proxy}/toxics", "/proxies/{proxy}/toxics/{toxic}"})
    CHECK_MESSAGE(json["paths"].contains(path), path);
  auto version = call(server, "GET", "/version");
  CHECK(version.content_type == "application/json;charset=utf-8");
  CHECK(version.body == "{\"version\":\"2.12.0-kproxy\"}\n");
}

TEST_CASE("one table behind the routes: what POST /proxies creates, GET /proxies lists and POST /reset clears the toxics of") {
  ProxyTable table(ProxyHost{});
  admin::AdminServer server;
  register_toxiproxy_routes(server, table, "v");
  const std::string upstream = "127.0.0.1:" + std::to_string(kproxy::testing::reserved_port());  // never connected to
  REQUIRE(call(server, "POST", "/proxies", R"({"name": "a", "listen": "127.0.0.1:0", "upstream": ")" + upstream + R"("})").status == 201);
  REQUIRE(call(server, "POST", "/proxies/a/toxics", R"({"name": "slow", "type": "latency", "attributes": {"latency": 5}})").status == 200);
  CHECK(table.list().body.contains("a"));
  CHECK(json_of(call(server, "GET", "/proxies"))["a"]["toxics"].size() == 1);
  CHECK(call(server, "POST", "/reset").status == 204);
  // Toxiproxy's reset removes every toxic and enables every proxy; the proxies stay.
  CHECK(call(server, "GET", "/proxies/a").status == 200);
  CHECK(json_of(call(server, "GET", "/proxies/a/toxics")).empty());
}
