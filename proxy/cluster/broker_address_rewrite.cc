#include "proxy/cluster/broker_address_rewrite.h"

#include <algorithm>
#include <list>
#include <tuple>

#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/generated/response_scan.h"
#include "codec/response_header.h"

namespace kproxy::cluster {

namespace {

using codec::ApiKey;

/// A DNS name is at most 253 characters (RFC 1035 2.3.4, without the trailing dot); 255 leaves
/// room for a literal IPv6 address with a zone.
constexpr size_t kMaxBrokerHost = 255;

/// A peer-supplied host for a log line: at most 64 bytes, non-printable bytes as '?'.
std::string shown(std::string_view host) {
  std::string out;
  for (char c : host.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (host.size() > 64) out += "...";
  return out;
}

}  // namespace

std::string broker_entry_problem(int32_t node_id, std::string_view host, int64_t port) {
  if (node_id < 0) {
    return "the broker names node id " + std::to_string(node_id) + " at " + shown(host) + ":" + std::to_string(port) +
           " (a negative node id names no broker: a broker bug or a corrupt response)";
  }
  if (host.size() > kMaxBrokerHost) {
    return "broker node " + std::to_string(node_id) + " advertises a host name of " + std::to_string(host.size()) + " bytes (" +
           shown(host) + "), longer than a DNS name can be (" + std::to_string(kMaxBrokerHost) + ")";
  }
  if (port < 1 || port > 65535) {
    return "broker node " + std::to_string(node_id) + " advertises port " + std::to_string(port) + " for " + shown(host) +
           ", which is not a TCP port (a broker bug or a corrupt response)";
  }
  return "";
}

namespace {

// One rewrite of one response: decodes it as M, lets `visit` replace addresses, re-encodes.
class Rewriting {
 public:
  Rewriting(BrokerDirectory& directory, const std::string& advertise, const std::optional<config::BrokerHostPattern>& broker_names,
            const std::map<int32_t, config::HostPort>& advertise_nodes, std::vector<BrokerAddressRewrite::NewBrokerPort>& added,
            std::string& error)
      : directory_(directory), advertise_(advertise), broker_names_(broker_names), advertise_nodes_(advertise_nodes), added_(added),
        error_(error) {}

  // What clients are told for `node_id` at kproxy port `proxy_port`: its own advertised address
  // when it has one, else host_for() and the kproxy port.
  std::pair<std::string_view, uint16_t> address_for(int32_t node_id, uint16_t proxy_port) {
    if (auto it = advertise_nodes_.find(node_id); it != advertise_nodes_.end()) return {it->second.host, it->second.port};
    return {host_for(node_id), proxy_port};
  }

  // The host clients are told for `node_id`: the advertise host, or on an SNI listener the
  // node's name from the broker pattern (kept until the response is re-encoded).
  std::string_view host_for(int32_t node_id) {
    if (!broker_names_) return advertise_;
    return rendered_.emplace_back(broker_names_->render(node_id));
  }

  // Replaces a broker's host and port with its kproxy address. False when it has none.
  template <class Port>
  bool replace(int32_t node_id, std::string_view& host, Port& port) {
    auto p = static_cast<int64_t>(port);
    if (node_id < 0 && host.empty() && p <= 0) return true;  // "no node" (e.g. FindCoordinator with an error): nothing real to hide
    // Passed on, such an entry would send the client to the broker directly, bypassing kproxy.
    if (std::string why = broker_entry_problem(node_id, host, p); !why.empty()) {
      error_ = std::move(why);
      return false;
    }
    auto learned = directory_.learn(node_id, host, static_cast<int32_t>(port));
    if (learned.proxy_port == 0) {
      // The directory says why (another listener owns the port, max_broker_ports, no port left).
      error_ = "no kproxy port can be given to broker node " + std::to_string(node_id) +
               (learned.refused.empty() ? " (check broker_ports / broker_port_range)" : ": " + learned.refused);
      return false;
    }
    // One response may name a node more than once while its listener is still to be opened: ask
    // for that listener once per response.
    if (learned.new_port && std::none_of(added_.begin(), added_.end(), [&](const auto& a) { return a.node_id == node_id; }))
      added_.push_back({node_id, learned.proxy_port});
    auto [target, target_port] = address_for(node_id, learned.proxy_port);
    if (host != target || static_cast<int32_t>(port) != target_port) {
      host = target;
      port = static_cast<Port>(target_port);
      changed_ = true;
    }
    return true;
  }

  // A controller endpoint (DescribeQuorum): the kproxy port of the broker at that address, or masked.
  void replace_controller(std::string_view& host, uint16_t& port) {
    for (const auto& route : directory_.routes()) {
      if (route.real.host == host && route.real.port == port) {
        std::tie(host, port) = address_for(route.node_id, route.proxy_port);
        changed_ = true;
        return;
      }
    }
    if (host != advertise_ || port != 0) {
      host = advertise_;
      port = 0;
      changed_ = true;
    }
  }

  template <class Endpoints>
  bool replace_all(Endpoints& endpoints) {
    for (auto& e : endpoints) {
      if (!replace(e.node_id, e.host, e.port)) return false;
    }
    return true;
  }

  template <class M, class Visit>
  BrokerAddressRewrite::Outcome run(int16_t version, int header_version, codec::Bytes frame, std::vector<uint8_t>& out, Visit&& visit) {
    using Outcome = BrokerAddressRewrite::Outcome;
    codec::Bytes message = frame.subspan(codec::kFrameSizePrefix);
    codec::ResponseHeader header;
    if (!codec::read_response_header(message, header_version, header, &error_)) return Outcome::kFailed;
    M body;
    codec::Reader r(message.subspan(header.size));
    body.read(r, version);
    if (!r.ok()) {
      error_ = r.error();
      return Outcome::kFailed;
    }
    if (!visit(body)) return Outcome::kFailed;
    if (!changed_) return Outcome::kUnchanged;
    out.clear();
    out.reserve(codec::kFrameSizePrefix + header.size + body.size(version));
    codec::Writer w(out);
    w.int32(0);
    codec::write_response_header(w, header);
    body.write(w, version);
    w.patch_int32(0, static_cast<int32_t>(out.size() - codec::kFrameSizePrefix));
    return Outcome::kRewritten;
  }

 private:
  BrokerDirectory& directory_;
  const std::string& advertise_;
  const std::optional<config::BrokerHostPattern>& broker_names_;
  const std::map<int32_t, config::HostPort>& advertise_nodes_;
  /// Host names written into this response (views into them are encoded). A list: stable addresses,
  /// and no allocation until a name is rendered (a deque allocates when made, and a Rewriting is made
  /// for every Produce response v10+: two allocations per response, found by bench/proxy/profile).
  std::list<std::string> rendered_;
  std::vector<BrokerAddressRewrite::NewBrokerPort>& added_;
  std::string& error_;
  bool changed_ = false;
};

}  // namespace

bool BrokerAddressRewrite::applies_to(int16_t api_key) {
  switch (static_cast<ApiKey>(api_key)) {
    case ApiKey::kMetadata:
    case ApiKey::kFindCoordinator:
    case ApiKey::kDescribeCluster:
    case ApiKey::kProduce:
    case ApiKey::kFetch:
    case ApiKey::kShareFetch:
    case ApiKey::kShareAcknowledge:
    case ApiKey::kDescribeQuorum: return true;
    default: return false;
  }
}

namespace {

// True when the body of `frame` scans and lacks the NodeEndpoints tag: nothing to rewrite. False
// when it carries the tag or does not scan (the decoder then rewrites it or says what is wrong).
bool scanned_without_node_endpoints(int16_t api_key, int16_t v, int header_version, codec::Bytes frame,
                                    std::optional<codec::ResponseScan>* scanned) {
  codec::ResponseHeader header;
  codec::Bytes message = frame.subspan(codec::kFrameSizePrefix);
  if (!codec::read_response_header(message, header_version, header, nullptr)) return false;
  codec::ResponseScan local;
  codec::ResponseScan& scan = scanned ? scanned->emplace() : local;
  if (!codec::scan_response(api_key, v, message.subspan(header.size), scan) ||
      scan.has_top_level_tag(BrokerAddressRewrite::kNodeEndpointsTag)) {
    if (scanned) scanned->reset();
    return false;
  }
  return true;
}

}  // namespace

BrokerAddressRewrite::Outcome BrokerAddressRewrite::rewrite(int16_t api_key, int16_t v, int header_version, codec::Bytes frame,
                                                            std::vector<uint8_t>& out, std::vector<NewBrokerPort>& added,
                                                            std::string& error, std::optional<codec::ResponseScan>* scanned) const {
  Rewriting rw(directory_, advertise_, broker_names_, advertise_nodes_, added, error);
  switch (static_cast<ApiKey>(api_key)) {
    case ApiKey::kMetadata:
      return rw.run<codec::MetadataResponse>(v, header_version, frame, out, [&](auto& m) { return rw.replace_all(m.brokers); });
    case ApiKey::kFindCoordinator:
      return rw.run<codec::FindCoordinatorResponse>(v, header_version, frame, out, [&](auto& m) {
        if (v <= 3) return rw.replace(m.node_id, m.host, m.port);
        return rw.replace_all(m.coordinators);
      });
    case ApiKey::kDescribeCluster:
      return rw.run<codec::DescribeClusterResponse>(v, header_version, frame, out, [&](auto& m) {
        for (auto& b : m.brokers) {
          if (!rw.replace(b.broker_id, b.host, b.port)) return false;
        }
        return true;
      });
    case ApiKey::kProduce:
      // NodeEndpoints exist from v10 (KIP-951); older bodies name no brokers.
      if (v < 10) return Outcome::kUnchanged;
      if (scanned_without_node_endpoints(api_key, v, header_version, frame, scanned)) return Outcome::kUnchanged;
      return rw.run<codec::ProduceResponse>(v, header_version, frame, out, [&](auto& m) { return rw.replace_all(m.node_endpoints); });
    case ApiKey::kFetch:
      if (v < 16) return Outcome::kUnchanged;
      if (scanned_without_node_endpoints(api_key, v, header_version, frame, scanned)) return Outcome::kUnchanged;
      return rw.run<codec::FetchResponse>(v, header_version, frame, out, [&](auto& m) { return rw.replace_all(m.node_endpoints); });
    case ApiKey::kShareFetch:
      return rw.run<codec::ShareFetchResponse>(v, header_version, frame, out, [&](auto& m) { return rw.replace_all(m.node_endpoints); });
    case ApiKey::kShareAcknowledge:
      return rw.run<codec::ShareAcknowledgeResponse>(v, header_version, frame, out,
                                                     [&](auto& m) { return rw.replace_all(m.node_endpoints); });
    case ApiKey::kDescribeQuorum:
      if (v < 2) return Outcome::kUnchanged;
      return rw.run<codec::DescribeQuorumResponse>(v, header_version, frame, out, [&](auto& m) {
        for (auto& node : m.nodes) {
          for (auto& l : node.listeners) rw.replace_controller(l.host, l.port);
        }
        return true;
      });
    default: return Outcome::kUnchanged;
  }
}

}  // namespace kproxy::cluster
