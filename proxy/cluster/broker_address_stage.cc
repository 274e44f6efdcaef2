#include "proxy/cluster/broker_address_stage.h"

#include <string>
#include <vector>

#include "codec/generated/api_keys.h"
#include "proxy/cluster/broker_address_rewrite.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/stage/frame_context.h"

namespace kproxy::cluster {

void BrokerAddressStage::on_response(stage::ResponseContext& ctx) {
  if (ctx.synthetic() || !wants_response(ctx.api_key())) return;
  auto what = [&] { return std::string(stage::api_label(ctx.api_key())) + " v" + std::to_string(ctx.api_version()); };
  if (ctx.header_version() < 0) {
    ctx.close({net::CloseCategory::kBrokerProtocolError,
               "cannot rewrite broker addresses in a " + what() + " response: version unknown to kproxy"});
    return;
  }
  std::vector<uint8_t> rewritten;
  std::vector<BrokerAddressRewrite::NewBrokerPort> added;
  std::string error;
  auto outcome =
      rewrite_.rewrite(ctx.api_key(), ctx.api_version(), ctx.header_version(), ctx.frame(), rewritten, added, error, ctx.scan_storage());
  for (const auto& a : added) opener_.open_broker_port(a.node_id, a.port);
  switch (outcome) {
    case BrokerAddressRewrite::Outcome::kFailed:
      metrics_.count(metrics::ProxyEvent::kMalformedResponse);
      ctx.close({net::CloseCategory::kBrokerProtocolError, "cannot rewrite broker addresses in a " + what() + " response: " + error});
      return;
    case BrokerAddressRewrite::Outcome::kRewritten:
      metrics_.count(metrics::ProxyEvent::kResponseRewritten);
      ctx.replace_frame(std::move(rewritten), id());
      return;
    case BrokerAddressRewrite::Outcome::kUnchanged:
      ctx.scan_stored();  // the body walked once, for the later stages too
      return;
  }
}

}  // namespace kproxy::cluster
