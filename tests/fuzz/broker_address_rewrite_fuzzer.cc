// Fuzz target: cluster::BrokerAddressRewrite on arbitrary responses of the APIs that name brokers.
//
// Input: [API selector (among the APIs applies_to() accepts)][version selector][port scheme
// selector] then the response after its size prefix. The target builds the frame, rewrites it
// with a fresh BrokerDirectory, and checks on a kRewritten outcome:
//   - the size prefix matches, the frame decodes at the same version, and round-trips;
//   - every newly numbered broker has a non-zero port the directory maps back to it;
//   - rewriting the rewritten frame with a fresh directory of the same config changes nothing
//     (addresses already point at kproxy), except for DescribeQuorum, whose controller endpoints
//     are resolved against what the directory learnt before.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/message.h"
#include "codec/response_header.h"
#include "proxy/cluster/broker_address_rewrite.h"
#include "proxy/cluster/broker_directory.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;

namespace {

std::vector<int16_t> applicable_apis() {
  std::vector<int16_t> v;
  for (int16_t k : codec::all_api_keys()) {
    if (cluster::BrokerAddressRewrite::applies_to(k)) v.push_back(k);
  }
  return v;
}

config::BrokerPorts ports_for(uint8_t sel) {
  config::BrokerPorts p;
  if (sel & 1) {
    p.scheme = config::BrokerPorts::Scheme::kInOrder;
    p.first = 20000;
    p.last = static_cast<uint16_t>(20000 + (sel >> 1) % 8);  // a small range: exhaustion happens
  } else {
    p.scheme = config::BrokerPorts::Scheme::kNodeIdOffset;
    p.base = (sel & 2) ? 65000 : 9100;  // 65000 + node id overflows quickly
  }
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<int16_t> apis = applicable_apis();
  if (size < 3 || apis.empty()) return 0;
  int16_t api_key = apis[data[0] % apis.size()];
  codec::VersionRange range = codec::response_versions(api_key);
  if (range.empty()) return 0;
  int16_t version = static_cast<int16_t>(range.min + data[1] % (range.max - range.min + 1));
  uint8_t port_sel = data[2];
  std::string advertise = (port_sel & 0x80) ? "kproxy.example" : "127.0.0.1";
  int header_version = codec::response_header_version(api_key, version);

  std::vector<uint8_t> frame;
  codec::Writer w(frame);
  w.int32(static_cast<int32_t>(size - 3));
  frame.insert(frame.end(), data + 3, data + size);

  cluster::BrokerDirectory directory(ports_for(port_sel));
  cluster::BrokerAddressRewrite rewrite(directory, advertise);
  std::vector<uint8_t> out;
  std::vector<cluster::BrokerAddressRewrite::NewBrokerPort> added;
  std::string error;
  auto outcome = rewrite.rewrite(api_key, version, header_version, codec::Bytes(frame.data(), frame.size()), out, added, error);
  std::string label = std::string(codec::api_name(api_key)) + " v" + std::to_string(version);

  std::set<int32_t> nodes;
  for (const auto& a : added) {
    fuzz::check(a.port != 0, label + ": a new broker port is 0");
    fuzz::check(nodes.insert(a.node_id).second, label + ": node " + std::to_string(a.node_id) + " reported new twice");
    auto route = directory.route_for_port(a.port);
    fuzz::check(route && route->node_id == a.node_id, label + ": the directory does not map the new port back to its node");
  }
  if (outcome != cluster::BrokerAddressRewrite::Outcome::kRewritten) return 0;

  fuzz::check(out.size() >= codec::kFrameSizePrefix, label + ": rewritten frame shorter than a size prefix");
  int32_t prefix = codec::peek_response_correlation_id(codec::Bytes(out.data(), out.size()));  // big-endian int32 at 0
  fuzz::check(static_cast<size_t>(prefix) == out.size() - codec::kFrameSizePrefix,
              label + ": size prefix does not match the rewritten frame");
  codec::Bytes message(out.data() + codec::kFrameSizePrefix, out.size() - codec::kFrameSizePrefix);
  codec::ResponseHeader h;
  fuzz::check(codec::read_response_header(message, header_version, h, &error), label + ": rewritten header does not parse: " + error);
  fuzz::check(h.correlation_id == codec::peek_response_correlation_id(codec::Bytes(frame.data() + 4, frame.size() - 4)),
              label + ": correlation id changed");
  auto body = codec::make_response(api_key);
  codec::Reader r(message.subspan(h.size));
  body->read(r, version);
  fuzz::check(r.ok() && r.at_end(), label + ": rewritten body does not decode to its end: " + r.error());
  fuzz::check_round_trip(*body, version, [&] { return codec::make_response(api_key); });

  if (api_key != static_cast<int16_t>(codec::ApiKey::kDescribeQuorum)) {
    cluster::BrokerDirectory fresh(ports_for(port_sel));
    cluster::BrokerAddressRewrite again(fresh, advertise);
    std::vector<uint8_t> out2;
    std::vector<cluster::BrokerAddressRewrite::NewBrokerPort> added2;
    auto outcome2 = again.rewrite(api_key, version, header_version, codec::Bytes(out.data(), out.size()), out2, added2, error);
    fuzz::check(
        outcome2 == cluster::BrokerAddressRewrite::Outcome::kUnchanged,
        label + ": rewriting a rewritten frame is not a no-op (outcome " + std::to_string(static_cast<int>(outcome2)) + ", " + error + ")");
  }
  return 0;
}
