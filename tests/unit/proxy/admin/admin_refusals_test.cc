// Regression tests for what property-based testing of the admin API found (issue #19; #15 item 1
// and "Admin refusals"): deep JSON nesting crashed kproxy, `PUT /faults/a%00b` installed `a`,
// a non-UTF-8 name got 500 (and an unknown non-UTF-8 path killed the process), a version given
// as a string inside {min, max} got 500, and refusals were neither logged nor counted.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>
#include <string>

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "proxy/admin/admin_server.h"
#include "proxy/admin/chaos_routes.h"
#include "proxy/chaos/rule_set.h"
#include "tests/unit/support/http_exchange.h"

using namespace kproxy;

namespace {

std::string request(uint16_t port, const std::string& method, const std::string& target, const std::string& body = "",
                    const std::string& headers = "") {
  return kproxy::testing::http_exchange(port, method + " " + target + " HTTP/1.1\r\nHost: x\r\n" + headers + "Content-Length: " +
                                                  std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

int status_of(const std::string& response) { return kproxy::testing::http_status_of(response); }

std::string error_of(const std::string& response) {
  auto p = response.find("\r\n\r\n");
  auto j = nlohmann::json::parse(p == std::string::npos ? "" : response.substr(p + 4), nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"].get<std::string>() : "";
}

/// An AdminServer on a free loopback port with the chaos routes.
struct ChaosServer {
  chaos::LiveRules control;
  admin::ChaosAdmin chaos_admin{control, [] { return std::string(); }};
  admin::AdminServer server;
  explicit ChaosServer(std::string token = "") : server(admin::AdminServerOptions{"127.0.0.1:0", std::move(token)}) {
    admin::register_chaos_routes(chaos_admin, server);
    REQUIRE(server.start() == "");
  }
};

std::string nested(size_t depth, const std::string& open, const std::string& close) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += open;
  for (size_t i = 0; i < depth; ++i) s += close;
  return s;
}

}  // namespace

TEST_CASE("admin refusals: json_too_deep counts nesting outside strings only") {
  CHECK_FALSE(admin::json_too_deep(R"({"match":{"versions":{"min":1}},"action":{"delay":1}})"));
  CHECK(admin::json_too_deep(nested(33, "[", "]")));
  CHECK_FALSE(admin::json_too_deep(nested(32, "[", "]")));
  CHECK_FALSE(admin::json_too_deep("\"" + nested(100, "[", "]") + "\""));                // inside a string
  CHECK_FALSE(admin::json_too_deep(R"(["\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["])"));  // escaped quote
  CHECK(admin::json_too_deep(nested(150000, "[", "]")));
}

TEST_CASE("admin refusals: a 150,000-deep JSON body gets 400 on every JSON route, kproxy keeps serving") {
  ChaosServer s;
  const std::string deep_name = "{\"name\":" + nested(150000, "[", "]") + ",\"action\":{\"drop_response\":true}}";
  const std::string deep_match = "{\"match\":" + nested(150000, "{\"a\":", "}") + ",\"action\":{\"drop_response\":true}}";
  for (const auto& body : {deep_name, deep_match}) {
    auto r = request(s.server.port(), "PUT", "/faults/x", body);
    CHECK(status_of(r) == 400);
    CHECK(error_of(r).find("nested deeper than 32") != std::string::npos);
  }
  CHECK(status_of(request(s.server.port(), "PUT", "/api-versions", nested(150000, "[", "]"))) == 400);
  // The handler alone refuses too (a caller that does not go through the server).
  CHECK(s.chaos_admin.put_fault("x", deep_name).status == 400);
  CHECK(s.chaos_admin.put_api_versions(nested(100000, "[", "]")).status == 400);
  CHECK(status_of(request(s.server.port(), "GET", "/faults")) == 200);
  CHECK(s.control.current()->rules.empty());
}

TEST_CASE("admin refusals: PUT /faults/a%00b is refused (400), nothing named a is installed") {
  ChaosServer s;
  const std::string rule = R"({"action":{"drop_response":true}})";
  for (const char* target : {"/faults/a%00b", "/faults/a%0ab", "/faults/a%7fb", "/faults/a%1b"}) {
    auto r = request(s.server.port(), "PUT", target, rule);
    CHECK_MESSAGE(status_of(r) == 400, target);
  }
  CHECK(s.control.current()->rules.empty());
  CHECK(status_of(request(s.server.port(), "GET", "/faults/a%00b")) == 400);
  CHECK(status_of(request(s.server.port(), "DELETE", "/faults/a%00")) == 400);
  // A literal %2541 is the name "%41" (invalid), not "A": the path is decoded exactly once.
  CHECK(status_of(request(s.server.port(), "PUT", "/faults/%2541", rule)) == 400);
  CHECK(status_of(request(s.server.port(), "PUT", "/faults/ok%2Dname", rule)) == 200);
  CHECK(s.control.rule("ok-name") != nullptr);
  CHECK(status_of(request(s.server.port(), "GET", "/faults/bad%zz")) == 400);
  // An encoded '/' would move the rest of the name into another path segment.
  CHECK(status_of(request(s.server.port(), "PUT", "/faults/a%2Fb", rule)) == 400);
  CHECK(status_of(request(s.server.port(), "GET", "/faults/a%2fb")) == 400);
  // "." and ".." are dot segments no HTTP client can send as a name.
  CHECK(status_of(request(s.server.port(), "PUT", "/faults/%2e%2e", rule)) == 400);
  CHECK(status_of(request(s.server.port(), "PUT", "/faults/%2E", rule)) == 400);
}

TEST_CASE("admin refusals: bytes that are not UTF-8 get 400/404, never 500 or a crash") {
  ChaosServer s;
  const std::string rule = R"({"action":{"drop_response":true}})";
  auto put = request(s.server.port(), "PUT", "/faults/%ff%fe", rule);
  CHECK(status_of(put) == 400);
  CHECK(error_of(put).find("not a valid rule name") != std::string::npos);
  CHECK(status_of(request(s.server.port(), "PUT", "/faults/x", "{\"name\":\"x\",\"action\":{\"close\":\"\xff\"}}")) == 400);
  CHECK(status_of(request(s.server.port(), "PUT", "/faults/%c3", "{\"name\":\"y\",\"action\":{\"drop_response\":true}}")) == 400);
  CHECK(status_of(request(s.server.port(), "GET", "/faults/%ff")) == 404);
  CHECK(status_of(request(s.server.port(), "DELETE", "/faults/%ff")) == 404);
  CHECK(status_of(request(s.server.port(), "GET", "/%ff/%fe")) == 404);  // json_error threw outside the try: the process died
  CHECK(status_of(request(s.server.port(), "PATCH", "/faults/%ff")) == 405);
  CHECK(status_of(request(s.server.port(), "GET", "/faults")) == 200);
  // Found by schemathesis on 53ff46d: a body that is not UTF-8 put its bytes into the parser's
  // message ("last read: ..."), and dumping that message threw: 500.
  for (const std::string& body : {std::string("\xff\xcf\x98\xff"
                                              "CT\x17\x04"),
                                  std::string("[\"\xc3\"]"), std::string("{\"\xfe\":1}")}) {
    auto versions = s.chaos_admin.put_api_versions(body);
    CHECK(versions.status == 400);
    CHECK(nlohmann::json::parse(versions.body)["error"].get<std::string>().rfind("malformed JSON", 0) == 0);
    CHECK(s.chaos_admin.put_fault("x", body).status == 400);
    CHECK(status_of(request(s.server.port(), "PUT", "/api-versions", body)) == 400);
  }
}

TEST_CASE("admin refusals: match.versions must be integers 0-32767 (a string in {min, max} was a 500)") {
  chaos::LiveRules c;
  admin::ChaosAdmin a(c, nullptr);
  for (const char* versions : {R"({"min":"x"})", R"({"max":1.5})", R"({"min":70000})", R"("3abc")", R"("1-2-3")", R"(70000)", R"("99999")",
                               R"(" 3")", R"({"min":true})"}) {
    auto r = a.put_fault("v", std::string(R"({"match":{"versions":)") + versions + R"(},"action":{"drop_response":true}})");
    CHECK_MESSAGE(r.status == 400, versions);
    CHECK(r.body.find("match.versions") != std::string::npos);
  }
  for (const char* versions : {R"(3)", R"("3")", R"("3-5")", R"("-5")", R"("3-")", R"("-")", R"({"min":1,"max":2})"}) {
    CHECK_MESSAGE(
        a.put_fault("v", std::string(R"({"match":{"versions":)") + versions + R"(},"action":{"drop_response":true}})").status == 200,
        versions);
  }
}

TEST_CASE("admin refusals: 401, 413 and 400 are logged with the client and counted by status") {
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  auto capture = std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  capture->set_level(spdlog::level::debug);
  spdlog::set_default_logger(capture);
  admin::reset_refusal_log_budget();
  {
    admin::AdminServerOptions options{"127.0.0.1:0", "sesame"};
    options.max_body_bytes = 1024;
    chaos::LiveRules control;
    admin::ChaosAdmin chaos_admin(control, nullptr);
    admin::AdminServer server(options);
    admin::register_chaos_routes(chaos_admin, server);
    REQUIRE(server.start() == "");
    CHECK(status_of(request(server.port(), "GET", "/faults", "", "Authorization: Bearer wrong\r\n")) == 401);
    CHECK(status_of(request(server.port(), "PUT", "/faults/x", std::string(2000, ' '), "Authorization: Bearer sesame\r\n")) == 413);
    CHECK(status_of(request(server.port(), "PUT", "/faults/x", "{nope", "Authorization: Bearer sesame\r\n")) == 400);
    CHECK(server.refusals(401) == 1);
    CHECK(server.refusals(413) == 1);
    CHECK(server.refusals(400) == 1);
    CHECK(server.refusals(404) == 0);
  }
  spdlog::set_default_logger(previous);
  {
    // A handler's 503 (a probe saying "not ready") is an answer: not counted, not logged.
    admin::AdminServer server;
    server.route("GET", "/readyz", [](const admin::HttpRequest&) { return admin::HttpResponse{503, "application/json", "{}"}; });
    admin::HttpRequest probe;
    probe.method = "GET";
    probe.path = "/readyz";
    CHECK(server.handle(probe).status == 503);
    CHECK(server.refusals(503) == 0);
  }
  const std::string text = log.str();
  CHECK(text.find("admin: refused GET /faults from 127.0.0.1:") != std::string::npos);
  CHECK(text.find(": 401 missing or wrong bearer token") != std::string::npos);
  CHECK(text.find(": 413 request body over 1024 bytes") != std::string::npos);
  CHECK(text.find(": 400 malformed JSON") != std::string::npos);
}
