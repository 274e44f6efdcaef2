// The admin API's routes agree with its contract, docs/admin-api.openapi.yaml: every route the
// server registers (register_admin_routes, the same call AdminRuntime makes) is documented with
// its method, and every documented operation is served. Both lists are derived: one from the
// server's route table, the other from the document (the repository's YAML and the JSON kproxy
// embeds and serves at GET /openapi.json).
#include "proxy/admin/openapi_document.h"

// GCC 12 warns of a maybe-uninitialized std::function inside std::regex's own code (GCC bug
// 105562), a false positive; the regexes here compile the document's patterns.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <functional>
#include <regex>
#include <set>
#include <string>

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "codec/generated/api_keys.h"
#include "codec/generated/error_code.h"
#include "proxy/admin/admin_runtime.h"
#include "proxy/admin/admin_server.h"
#include "proxy/admin/chaos_routes.h"
#include "proxy/admin/health.h"
#include "proxy/chaos/fault_rule.h"
#include "proxy/chaos/rule_set.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/tap/tap_hub.h"
#include "proxy/util/glob.h"

using namespace kproxy;

namespace {

const std::set<std::string> kMethods = {"get", "put", "post", "delete", "patch", "head", "options", "trace"};

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

/// "METHOD /path" of every route kproxy's admin listener serves.
std::set<std::string> served_operations() {
  admin::AdminServer server;
  chaos::LiveRules control;
  admin::ChaosAdmin chaos_admin(control, [] { return std::string(); });
  admin::HealthHooks hooks;
  hooks.worker_count = [] { return size_t{0}; };
  hooks.post = [](size_t, std::function<void()>) {};
  hooks.upstreams = [] { return std::vector<std::string>{}; };
  hooks.draining = [] { return false; };
  admin::Health health(hooks);
  metrics::ProxyMetrics metrics;
  tap::TapHub tap;
  admin::register_admin_routes(server, chaos_admin, health, metrics, tap, std::make_shared<observe::TransactionTracker>());
  std::set<std::string> out;
  for (const auto& r : server.routes()) out.insert(r.method + " " + r.pattern);
  return out;
}

std::set<std::string> documented_operations(const nlohmann::json& doc) {
  std::set<std::string> out;
  for (const auto& [path, item] : doc.at("paths").items()) {
    for (const auto& [method, op] : item.items()) {
      if (kMethods.count(method)) out.insert(upper(method) + " " + path);
    }
  }
  return out;
}

std::set<std::string> documented_operations(const YAML::Node& doc) {
  std::set<std::string> out;
  for (const auto& path : doc["paths"]) {
    for (const auto& op : path.second) {
      std::string method = op.first.as<std::string>();
      if (kMethods.count(method)) out.insert(upper(method) + " " + path.first.as<std::string>());
    }
  }
  return out;
}

}  // namespace

TEST_CASE("openapi: the routes kproxy serves and the documented operations are the same") {
  auto served = served_operations();
  auto embedded = nlohmann::json::parse(admin::openapi_json());
  auto documented = documented_operations(embedded);
  REQUIRE(served.size() >= 15);
  for (const auto& op : served) CHECK_MESSAGE(documented.count(op) == 1, "served but not documented: " << op);
  for (const auto& op : documented) CHECK_MESSAGE(served.count(op) == 1, "documented but not served: " << op);

  // The embedded JSON is the repository's YAML (regenerated at build time).
  auto yaml = YAML::LoadFile(std::string(KPROXY_SOURCE_DIR) + "/docs/admin-api.openapi.yaml");
  CHECK(documented_operations(yaml) == documented);
  CHECK(embedded.at("openapi").get<std::string>().rfind("3.1", 0) == 0);
}

TEST_CASE("openapi: every operation documents its refusals; bodies document 413") {
  auto doc = nlohmann::json::parse(admin::openapi_json());
  for (const auto& [path, item] : doc.at("paths").items()) {
    for (const auto& [method, op] : item.items()) {
      if (!kMethods.count(method)) continue;
      INFO(method << " " << path);
      const auto& responses = op.at("responses");
      CHECK(responses.contains("400"));  // malformed query, control characters in the path
      CHECK(responses.contains("401"));  // bearer token
      if (op.contains("requestBody")) CHECK(responses.contains("413"));
      if (path.find('{') != std::string::npos && method != "put") CHECK(responses.contains("404"));
      CHECK(op.contains("operationId"));
    }
  }
  CHECK(doc.at("components").at("securitySchemes").at("bearerAuth").at("scheme") == "bearer");
}

TEST_CASE("openapi: ApiRef and ErrorRef list exactly the APIs and errors of kproxy's codec") {
  // A schema-valid rule must be a valid rule (issue #30): the document names every API and error
  // the codec knows, and no other.
  auto doc = nlohmann::json::parse(admin::openapi_json());
  const auto& schemas = doc.at("components").at("schemas");
  std::set<std::string> api_names, error_names;
  std::set<int64_t> api_keys, error_codes;
  for (const auto& v : schemas.at("ApiRef").at("anyOf").at(0).at("enum")) api_names.insert(v.get<std::string>());
  for (const auto& v : schemas.at("ApiRef").at("anyOf").at(1).at("enum")) api_keys.insert(v.get<int64_t>());
  for (const auto& v : schemas.at("ErrorRef").at("anyOf").at(0).at("enum")) error_names.insert(v.get<std::string>());
  for (const auto& v : schemas.at("ErrorRef").at("anyOf").at(1).at("enum")) error_codes.insert(v.get<int64_t>());
  std::set<std::string> codec_api_names, codec_error_names;
  std::set<int64_t> codec_api_keys, codec_error_codes;
  for (int k = 0; k <= 0x7fff; ++k) {
    if (const char* name = codec::api_name(static_cast<int16_t>(k))) {
      codec_api_names.insert(name);
      codec_api_keys.insert(k);
    }
  }
  for (int c = -1; c <= 0x7fff; ++c) {
    if (const char* name = codec::error_name(static_cast<int16_t>(c))) {
      codec_error_names.insert(name);
      codec_error_codes.insert(c);
    }
  }
  CHECK(api_names == codec_api_names);
  CHECK(api_keys == codec_api_keys);
  CHECK(error_names == codec_error_names);
  CHECK(error_codes == codec_error_codes);
  CHECK(codec_api_names.size() > 90);
  CHECK(codec_error_names.size() > 130);
}

namespace {

/// Every string of `alphabet` up to `max_length` characters, passed to `visit`.
template <typename Visit>
void every_string(const std::string& alphabet, size_t max_length, Visit visit) {
  std::string s;
  std::function<void()> extend = [&] {
    visit(s);
    if (s.size() == max_length) return;
    for (char c : alphabet) {
      s.push_back(c);
      extend();
      s.pop_back();
    }
  };
  extend();
}

}  // namespace

TEST_CASE("openapi: the Glob pattern accepts exactly the globs kproxy's parser accepts") {
  // Schema-valid must mean valid (issue #30): checked on every string of up to 6 characters
  // over the characters that matter to the grammar.
  auto doc = nlohmann::json::parse(admin::openapi_json());
  const std::regex pattern(doc.at("components").at("schemas").at("Glob").at("pattern").get<std::string>(), std::regex::ECMAScript);
  size_t checked = 0, valid = 0;
  every_string("a-]![\\^", 6, [&](const std::string& glob) {
    bool by_schema = std::regex_search(glob, pattern);
    bool by_parser = util::glob_error(glob).empty();
    if (by_schema != by_parser) FAIL_CHECK("glob '" << glob << "': schema " << by_schema << ", parser " << by_parser);
    ++checked;
    valid += by_parser;
  });
  CHECK(checked == 137257);  // 1 + 7 + ... + 7^6
  CHECK(valid > 1000);
  CHECK(checked - valid > 1000);
}

TEST_CASE("openapi: the Versions string pattern accepts exactly the versions kproxy's parser reads") {
  auto doc = nlohmann::json::parse(admin::openapi_json());
  std::string text;
  for (const auto& alternative : doc.at("components").at("schemas").at("Versions").at("oneOf")) {
    if (alternative.value("type", "") == "string") text = alternative.at("pattern").get<std::string>();
  }
  REQUIRE(!text.empty());
  const std::regex pattern(text, std::regex::ECMAScript);
  size_t checked = 0;
  auto compare = [&](const std::string& versions) {
    std::string error;
    chaos::Refusal refusal = chaos::Refusal::kNone;
    chaos::parse_fault_rule(nlohmann::json{{"name", "r"}, {"match", {{"versions", versions}}}, {"action", {{"delay", 1}}}}, error, {},
                            &refusal);
    // Malformed is what the schema must refuse; an empty range ("5-3") is well formed (422).
    bool by_parser = refusal != chaos::Refusal::kMalformed;
    bool by_schema = std::regex_search(versions, pattern);
    if (by_schema != by_parser) FAIL_CHECK("versions '" << versions << "': schema " << by_schema << ", parser " << error);
    ++checked;
  };
  every_string("0139-", 6, compare);
  for (const char* edge : {"32767", "32768", "99999", "00000", "032767", "-32767", "32767-", "3276-32767", "4-x", "1 - 2"}) compare(edge);
  CHECK(checked == 19541);  // 1 + 5 + ... + 5^6, and the 10 edges
}

TEST_CASE("openapi: the Duration string pattern accepts only durations kproxy's parser reads (issue #46)") {
  // "7151m" matched the pattern (up to 9999 minutes) and was refused as "expected a duration":
  // a schema-valid PUT /scenario got 400. The schema may be stricter than the parser (no leading
  // zeros), never looser.
  auto doc = nlohmann::json::parse(admin::openapi_json());
  std::string text;
  for (const auto& alternative : doc.at("components").at("schemas").at("Duration").at("oneOf")) {
    if (alternative.value("type", "") == "string") text = alternative.at("pattern").get<std::string>();
  }
  REQUIRE(!text.empty());
  const std::regex pattern(text, std::regex::ECMAScript);
  size_t accepted = 0;
  auto compare = [&](const std::string& duration) {
    bool by_schema = std::regex_search(duration, pattern);
    bool by_parser = chaos::parse_duration(nlohmann::json(duration)).has_value();
    if (by_schema && !by_parser) FAIL_CHECK("duration '" << duration << "': the schema takes it, the parser refuses it");
    accepted += by_schema;
  };
  for (const char* unit : {"", "ms", "s", "m"}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7151}, int64_t{1439}, int64_t{1440}, int64_t{1441}, int64_t{9999}, int64_t{86399},
                      int64_t{86400}, int64_t{86401}, int64_t{99999}, int64_t{86399999}, int64_t{86400000}, int64_t{86400001},
                      int64_t{99999999}, int64_t{999999999999}}) {
      compare(std::to_string(n) + unit);
    }
  }
  for (int64_t n = 86390000; n <= 86410000; n += 7) compare(std::to_string(n));
  for (int64_t n = 86300; n <= 86500; ++n) compare(std::to_string(n) + "s");
  for (int64_t n = 1300; n <= 1500; ++n) compare(std::to_string(n) + "m");
  // What the schema takes at the bounds: every unit up to one day.
  CHECK(std::regex_search("86400000ms", pattern));
  CHECK(std::regex_search("86400s", pattern));
  CHECK(std::regex_search("1440m", pattern));
  CHECK_FALSE(std::regex_search("1441m", pattern));
  CHECK(accepted > 1000);
}
