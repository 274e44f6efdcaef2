// BrokerAddressStage: the first response stage. Responses that name brokers (Metadata,
// FindCoordinator, DescribeCluster, Produce/Fetch NodeEndpoints, ...) leave with every broker
// address replaced by kproxy's own (proxy/cluster/broker_address_rewrite.h), so a client never learns an
// address that bypasses the proxy. A broker that gets a kproxy port for the first time is reported
// to the connection, which opens its listener.
#pragma once

#include <cstdint>

#include "proxy/cluster/broker_address_rewrite.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/stage/services.h"
#include "proxy/stage/stage.h"

namespace kproxy::cluster {

class BrokerAddressStage final : public stage::Stage {
 public:
  explicit BrokerAddressStage(const stage::StageSetup& setup)
      : BrokerAddressStage(setup.rewrite, setup.port_opener, setup.services.metrics) {}
  /// `metrics` counts responses rewritten and those that did not decode.
  BrokerAddressStage(const BrokerAddressRewrite& rewrite, stage::BrokerPortOpener& opener, metrics::ProxyMetrics& metrics)
      : rewrite_(rewrite), opener_(opener), metrics_(metrics) {}
  stage::StageId id() const override { return stage::StageId::kBrokerAddress; }
  static bool wants_request(int16_t) { return false; }
  static bool wants_response(int16_t api_key) { return BrokerAddressRewrite::applies_to(api_key); }
  void on_response(stage::ResponseContext& ctx) override;

 private:
  const BrokerAddressRewrite& rewrite_;
  stage::BrokerPortOpener& opener_;
  metrics::ProxyMetrics& metrics_;
};

}  // namespace kproxy::cluster
