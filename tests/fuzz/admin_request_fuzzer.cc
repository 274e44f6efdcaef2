// Fuzz target: the admin HTTP request path, as the server runs it on every request that arrives
// (AdminServer::handle_message: parse_request_head, admit (path decoding, query, bearer token,
// body cap), the body, then handle (route match, JSON depth bound, the handler)), with the real
// chaos routes (/faults, /faults/{name}, /faults/reset, /api-versions, /reload) on a LiveRules.
//
// Input: byte 0 picks the server (bit 0: a bearer token "fuzz-token" is required); the rest is
// up to four HTTP messages separated by "\0\0\0\0" (a NUL is never valid in a head), served in
// order on the same rule set, which is emptied before each input.
//
// Properties: nothing crashes or throws; no 500 (docs/admin-api.openapi.yaml: a 5xx other than
// 503 is a kproxy bug); every JSON response body parses; a refusal's status is one the server
// counts; with a token required, a message that does not carry it is never answered 2xx; the
// rule set never holds more than the cap.
#include <cstdint>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "proxy/admin/admin_server.h"
#include "proxy/admin/chaos_routes.h"
#include "proxy/chaos/rule_set.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;

namespace {

constexpr size_t kMaxRules = 16;
constexpr std::string_view kToken = "fuzz-token";

struct Target {
  chaos::LiveRules control;
  admin::ChaosAdmin chaos{control, [] { return std::string("fuzz.yaml:1:1: reload refused in the fuzzer"); }, [] { return kMaxRules; }};
  admin::AdminServer open_server{options("")};
  admin::AdminServer token_server{options(std::string(kToken))};

  static admin::AdminServerOptions options(std::string token) {
    admin::AdminServerOptions o;
    o.bearer_token = std::move(token);
    o.max_body_bytes = 4096;
    return o;
  }
  Target() {
    spdlog::set_level(spdlog::level::off);  // refusals are logged; the fuzzer makes millions
    admin::register_chaos_routes(chaos, open_server);
    admin::register_chaos_routes(chaos, token_server);
  }
};

bool counted_refusal(int status) {
  for (int s : admin::kRefusalStatuses) {
    if (s == status) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Target* target = new Target();
  if (size == 0) return 0;
  const bool with_token = data[0] & 1;
  admin::AdminServer& server = with_token ? target->token_server : target->open_server;
  target->control.reset_rules();
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (int i = 0; i < 4 && !rest.empty(); ++i) {
    const size_t cut = rest.find(std::string_view("\0\0\0\0", 4));
    std::string_view message = rest.substr(0, cut);
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 4);

    admin::HttpResponse r = server.handle_message(message, "127.0.0.1:1");
    const std::string head = std::string(message.substr(0, 200));
    fuzz::check(r.status != 500, "500 for a request: " + r.body + "\n  request starts " + head);
    fuzz::check(r.status >= 200 && r.status < 600, "status " + std::to_string(r.status));
    if (r.status >= 400) fuzz::check(counted_refusal(r.status), "a refusal the server does not count: " + std::to_string(r.status));
    if (r.content_type == "application/json" && !r.body.empty()) {
      fuzz::check(!nlohmann::json::parse(r.body, nullptr, false).is_discarded(),
                  "a JSON response that does not parse: " + r.body.substr(0, 200));
    }
    if (with_token && message.find(kToken) == std::string_view::npos) {
      fuzz::check(r.status >= 400, "answered " + std::to_string(r.status) + " without the token\n  request starts " + head);
    }
    fuzz::check(target->control.current()->rules.size() <= kMaxRules, "more rules installed than the cap");
  }
  return 0;
}
