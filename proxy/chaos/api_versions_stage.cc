#include "proxy/chaos/api_versions_stage.h"

#include <spdlog/spdlog.h>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages/api_versions.h"
#include "proxy/chaos/rule_snapshot.h"
#include "proxy/policy/api_versions_policy.h"
#include "proxy/stage/frame_context.h"

namespace kproxy::chaos {

namespace {
constexpr int16_t kApiVersions = static_cast<int16_t>(codec::ApiKey::kApiVersions);
}

void ApiVersionsStage::on_request(stage::RequestContext& ctx) {
  const auto& h = ctx.header();
  if (h.api_key != kApiVersions) return;
  // The policy's client_id scope is the ApiVersions request's (a connection has one client).
  client_id_ = h.client_id ? std::string(*h.client_id) : std::string();
  if (h.header_version >= 0) {
    if (h.api_version < 3) return;
    if (auto m = ctx.message()) {
      const auto& av = static_cast<const codec::ApiVersionsRequest&>(*m);
      ctx.set_client_software(std::string(av.client_software_name), std::string(av.client_software_version));
    }
  } else if (h.api_version > codec::request_versions(kApiVersions).max) {
    // Newer than kproxy decodes: answer as a broker would, the client retries lower (KIP-511;
    // docs/protocol.md "Requests newer than kproxy").
    ctx.answer(policy::unsupported_api_versions_frame(h.correlation_id));
  }
}

void ApiVersionsStage::on_response(stage::ResponseContext& ctx) {
  if (ctx.api_key() != kApiVersions || ctx.synthetic()) return;
  auto m = ctx.message();
  if (!m) {
    spdlog::debug("conn={} ApiVersions response not decoded ({}): forwarded as is", ctx.connection().id, ctx.decode_error());
    return;
  }
  if (policy::rewrite_api_versions(static_cast<codec::ApiVersionsResponse&>(*m), rules_.get().api_versions,
                                   policy::ClientIdentity{ctx.connection().listener, client_id_}))
    ctx.mark_dirty(id());
}

}  // namespace kproxy::chaos
