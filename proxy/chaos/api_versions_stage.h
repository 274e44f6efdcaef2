// ApiVersionsStage: everything kproxy does with ApiVersions.
//
// Requests: a v3+ request names the client's software (KIP-511), kept on the connection for
// metrics and logs; a request newer than kproxy decodes is answered by kproxy with the v0
// UNSUPPORTED_VERSION answer a broker gives (the client retries lower; KIP-511).
// Responses: the version ranges and features are clamped or hidden by the `api_versions:` policy
// (proxy/policy/api_versions_policy.h, docs/api-versions-policy.md), which reloads and the admin
// API may change at any time; entries scoped by listener and client id apply to the connection's
// listener and the client id of its ApiVersions request.
#pragma once

#include <string>

#include "codec/generated/api_keys.h"
#include "proxy/stage/stage.h"

namespace kproxy::chaos {

class RuleSnapshot;

class ApiVersionsStage final : public stage::Stage {
 public:
  explicit ApiVersionsStage(RuleSnapshot& rules) : rules_(rules) {}
  explicit ApiVersionsStage(const stage::StageSetup& setup) : ApiVersionsStage(setup.rules) {}
  stage::StageId id() const override { return stage::StageId::kApiVersions; }
  static bool wants_request(int16_t api_key) { return api_key == static_cast<int16_t>(codec::ApiKey::kApiVersions); }
  static bool wants_response(int16_t api_key) { return api_key == static_cast<int16_t>(codec::ApiKey::kApiVersions); }
  void on_request(stage::RequestContext& ctx) override;
  void on_response(stage::ResponseContext& ctx) override;

 private:
  RuleSnapshot& rules_;
  std::string client_id_;  ///< of the last ApiVersions request ("" when null)
};

}  // namespace kproxy::chaos
