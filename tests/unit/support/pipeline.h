// What unit tests of the pipeline and its stages share: a recording PipelineOutput, raw request
// frames, the collaborators a Pipeline is made with and fault rules put by name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <uv.h>
#include <nlohmann/json.hpp>

#include "codec/writer.h"
#include "config/config.h"
#include "proxy/chaos/rule_set.h"
#include "proxy/cluster/broker_address_rewrite.h"
#include "proxy/cluster/broker_directory.h"
#include "proxy/metrics/connection_metrics.h"
#include "proxy/pipeline/pipeline.h"
#include "tests/unit/support/loop.h"
#include "tests/unit/support/services.h"

namespace kproxy::testing {

/// A PipelineOutput that keeps everything the pipeline hands it.
struct RecordingOutput final : pipeline::PipelineOutput {
  std::vector<std::string> to_client, to_broker;
  int resets = 0;
  int flushes = 0;
  size_t client_bytes = 0, client_bytes_at_flush = 0;  ///< sent to the client: in all, and when flush() last ran
  std::optional<net::CloseReason> closed;
  std::vector<std::pair<int32_t, uint16_t>> broker_ports;

  void send_to_broker(codec::Bytes b) override { to_broker.emplace_back(b.begin(), b.end()); }
  void send_to_client(codec::Bytes b) override {
    to_client.emplace_back(b.begin(), b.end());
    client_bytes += b.size();
  }
  void flush() override {
    ++flushes;
    client_bytes_at_flush = client_bytes;
  }
  void close(net::CloseReason reason) override { closed = std::move(reason); }
  void reset_client() override { ++resets; }
  void open_broker_port(int32_t node_id, uint16_t port) override { broker_ports.emplace_back(node_id, port); }
};

/// What a Pipeline is made with besides its rules and output, as a listener would give it: broker
/// ports from 19000 + node id advertised as proxy.local, the connection's gauges and the test's
/// own services (`view`: set its observer to watch the frames).
struct PipelineCollaborators {
  TestServices services;
  stage::Services view = services.view();
  config::BrokerPorts ports{config::BrokerPorts::Scheme::kNodeIdOffset, 19000};
  cluster::BrokerDirectory directory{ports};
  cluster::BrokerAddressRewrite rewrite{directory, "proxy.local"};
  metrics::ConnectionMetrics metrics{services.metrics, 0};
};

/// A request frame from raw body bytes: size prefix, header v1 (client id "t"), or v2 (an empty
/// tagged-field section after it) when `flexible`, then `body`.
inline std::vector<uint8_t> raw_request_frame(int16_t api, int16_t version, int32_t correlation_id, const std::vector<uint8_t>& body = {},
                                              bool flexible = false) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  w.int32(static_cast<int32_t>(10 + 1 + (flexible ? 1 : 0) + body.size()));
  w.int16(api);
  w.int16(version);
  w.int32(correlation_id);
  w.int16(1);
  out.push_back('t');
  if (flexible) out.push_back(0);  // no tagged fields
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

/// Puts the fault rule `rule` (JSON, as the admin API takes it) under `name`; fails the test when
/// it is refused.
inline void put_rule(chaos::LiveRules& control, const char* name, const char* rule) {
  std::string e = control.put_rule(name, nlohmann::json::parse(rule));
  INFO(e);
  REQUIRE(e.empty());
}

}  // namespace kproxy::testing
