#include "proxy/cluster/broker_address_rewrite.h"

#include <doctest/doctest.h>

#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/response_header.h"

using namespace kproxy;
using cluster::BrokerAddressRewrite;
using cluster::BrokerDirectory;

namespace {

config::BrokerPorts offset_ports(uint16_t base) {
  config::BrokerPorts p;
  p.scheme = config::BrokerPorts::Scheme::kNodeIdOffset;
  p.base = base;
  return p;
}

// A whole response frame: size prefix, header (version from the generated table), body.
template <class M>
std::vector<uint8_t> response_frame(const M& body, int16_t version, int32_t correlation_id = 7) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  w.int32(0);
  codec::ResponseHeader h;
  h.correlation_id = correlation_id;
  h.header_version = codec::response_header_version(M::kApiKey, version);
  codec::write_response_header(w, h);
  body.write(w, version);
  w.patch_int32(0, static_cast<int32_t>(out.size() - 4));
  return out;
}

template <class M>
M decode(const std::vector<uint8_t>& frame, int16_t version) {
  codec::Bytes message = codec::Bytes(frame).subspan(4);
  codec::ResponseHeader h;
  std::string error;
  REQUIRE(codec::read_response_header(message, codec::response_header_version(M::kApiKey, version), h, &error));
  CHECK(h.correlation_id == 7);
  M m;
  codec::Reader r(message.subspan(h.size));
  m.read(r, version);
  REQUIRE_MESSAGE(r.ok(), r.error());
  CHECK(r.at_end());
  // The size prefix matches the bytes.
  CHECK(codec::peek_response_correlation_id(codec::Bytes(frame)) == static_cast<int32_t>(frame.size() - 4));
  return m;
}

/// Sets `endpoints` (a KIP-951 NodeEndpoints list of any response) to one broker at `host`:9092.
template <typename Endpoints>
void one_endpoint(Endpoints& endpoints, int32_t node_id, const char* host) {
  endpoints.clear();
  endpoints.resize(1);
  endpoints[0].node_id = node_id;
  endpoints[0].host = host;
  endpoints[0].port = 9092;
}

struct Fixture {
  BrokerDirectory directory{offset_ports(19000)};
  BrokerAddressRewrite rewrite{directory, "proxy.local"};
  std::vector<uint8_t> out;
  std::vector<BrokerAddressRewrite::NewBrokerPort> added;
  std::string error;

  template <class M>
  BrokerAddressRewrite::Outcome run(const M& body, int16_t version) {
    auto frame = response_frame(body, version);
    out.clear();
    added.clear();
    return rewrite.rewrite(M::kApiKey, version, codec::response_header_version(M::kApiKey, version), frame, out, added, error);
  }
};

/// A Metadata response naming node 1 at 10.0.0.1:9092 and node 3 at 10.0.0.3:9092.
codec::MetadataResponse nodes_1_and_3() {
  codec::MetadataResponse m;
  m.brokers.resize(2);
  m.brokers[0].node_id = 1;
  m.brokers[0].host = "10.0.0.1";
  m.brokers[0].port = 9092;
  m.brokers[1].node_id = 3;
  m.brokers[1].host = "10.0.0.3";
  m.brokers[1].port = 9092;
  return m;
}

}  // namespace

TEST_CASE("Metadata brokers get kproxy addresses, at every version") {
  for (int16_t v = 0; v <= codec::MetadataResponse::kMaxVersion; ++v) {
    CAPTURE(v);
    Fixture f;
    codec::MetadataResponse m = nodes_1_and_3();
    REQUIRE(f.run(m, v) == BrokerAddressRewrite::Outcome::kRewritten);
    auto got = decode<codec::MetadataResponse>(f.out, v);
    REQUIRE(got.brokers.size() == 2);
    CHECK(got.brokers[0].host == "proxy.local");
    CHECK(got.brokers[0].port == 19001);
    CHECK(got.brokers[1].host == "proxy.local");
    CHECK(got.brokers[1].port == 19003);
    REQUIRE(f.added.size() == 2);
    CHECK(f.added[0].node_id == 1);
    CHECK(f.added[1].port == 19003);
    // The directory remembers where the brokers really are.
    CHECK(f.directory.route_for_port(19003)->real == config::HostPort{"10.0.0.3", 9092});
    // A second response names the same brokers: only the port whose listener is not open yet
    // (node 3: its open failed) is asked for again; once it is open, no new ports.
    f.directory.opened(1);
    REQUIRE(f.run(m, v) == BrokerAddressRewrite::Outcome::kRewritten);
    REQUIRE(f.added.size() == 1);
    CHECK(f.added[0].node_id == 3);
    f.directory.opened(3);
    REQUIRE(f.run(m, v) == BrokerAddressRewrite::Outcome::kRewritten);
    CHECK(f.added.empty());
  }
}

TEST_CASE("a node with its own advertised address is written as that address; kproxy still gives it its port") {
  BrokerDirectory directory{offset_ports(19000)};
  BrokerAddressRewrite rewrite{directory, "proxy.local", std::nullopt, {{1, {"localhost", 32771}}}};
  codec::MetadataResponse m = nodes_1_and_3();
  const int16_t v = 12;
  auto frame = response_frame(m, v);
  std::vector<uint8_t> out;
  std::vector<BrokerAddressRewrite::NewBrokerPort> added;
  std::string error;
  REQUIRE(rewrite.rewrite(codec::MetadataResponse::kApiKey, v, codec::response_header_version(codec::MetadataResponse::kApiKey, v), frame,
                          out, added, error) == BrokerAddressRewrite::Outcome::kRewritten);
  auto got = decode<codec::MetadataResponse>(out, v);
  REQUIRE(got.brokers.size() == 2);
  CHECK(got.brokers[0].host == "localhost");
  CHECK(got.brokers[0].port == 32771);
  CHECK(got.brokers[1].host == "proxy.local");  // not listed: advertise host, kproxy port
  CHECK(got.brokers[1].port == 19003);
  REQUIRE(added.size() == 2);  // node 1's kproxy port (19001) is opened all the same
  CHECK(added[0].port == 19001);
  CHECK(directory.route_for_port(19001)->real == config::HostPort{"10.0.0.1", 9092});
}

TEST_CASE("FindCoordinator: v0-3 top-level address, v4+ coordinators, errors left alone") {
  Fixture f;
  codec::FindCoordinatorResponse old;
  old.node_id = 2;
  old.host = "10.0.0.2";
  old.port = 9093;
  REQUIRE(f.run(old, 3) == BrokerAddressRewrite::Outcome::kRewritten);
  auto got = decode<codec::FindCoordinatorResponse>(f.out, 3);
  CHECK(got.host == "proxy.local");
  CHECK(got.port == 19002);

  codec::FindCoordinatorResponse none;  // COORDINATOR_NOT_AVAILABLE: node -1, no address
  none.error_code = 15;
  none.node_id = -1;
  none.host = "";
  none.port = -1;
  CHECK(f.run(none, 2) == BrokerAddressRewrite::Outcome::kUnchanged);

  codec::FindCoordinatorResponse v4;
  v4.coordinators.resize(2);
  v4.coordinators[0].key = "group-a";
  v4.coordinators[0].node_id = 5;
  v4.coordinators[0].host = "10.0.0.5";
  v4.coordinators[0].port = 9092;
  v4.coordinators[1].key = "group-b";
  v4.coordinators[1].node_id = -1;
  v4.coordinators[1].error_code = 15;
  REQUIRE(f.run(v4, 6) == BrokerAddressRewrite::Outcome::kRewritten);
  auto got4 = decode<codec::FindCoordinatorResponse>(f.out, 6);
  CHECK(got4.coordinators[0].host == "proxy.local");
  CHECK(got4.coordinators[0].port == 19005);
  CHECK(got4.coordinators[1].node_id == -1);
}

TEST_CASE("DescribeCluster brokers") {
  Fixture f;
  codec::DescribeClusterResponse m;
  m.brokers.resize(1);
  m.brokers[0].broker_id = 4;
  m.brokers[0].host = "b4";
  m.brokers[0].port = 9092;
  REQUIRE(f.run(m, 1) == BrokerAddressRewrite::Outcome::kRewritten);
  auto got = decode<codec::DescribeClusterResponse>(f.out, 1);
  CHECK(got.brokers[0].host == "proxy.local");
  CHECK(got.brokers[0].port == 19004);
}

TEST_CASE("KIP-951 NodeEndpoints in Produce and Fetch; untouched when absent") {
  Fixture f;
  codec::ProduceResponse produce;
  CHECK(f.run(produce, 11) == BrokerAddressRewrite::Outcome::kUnchanged);
  CHECK(f.run(produce, 9) == BrokerAddressRewrite::Outcome::kUnchanged);
  one_endpoint(produce.node_endpoints, 2, "real-2");
  REQUIRE(f.run(produce, 11) == BrokerAddressRewrite::Outcome::kRewritten);
  auto gotp = decode<codec::ProduceResponse>(f.out, 11);
  CHECK(gotp.node_endpoints[0].host == "proxy.local");
  CHECK(gotp.node_endpoints[0].port == 19002);

  codec::FetchResponse fetch;
  one_endpoint(fetch.node_endpoints, 3, "real-3");
  REQUIRE(f.run(fetch, 16) == BrokerAddressRewrite::Outcome::kRewritten);
  auto gotf = decode<codec::FetchResponse>(f.out, 16);
  CHECK(gotf.node_endpoints[0].port == 19003);
}

TEST_CASE("ShareFetch and ShareAcknowledge NodeEndpoints") {
  Fixture f;
  codec::ShareFetchResponse sf;
  one_endpoint(sf.node_endpoints, 1, "real-1");
  REQUIRE(f.run(sf, 1) == BrokerAddressRewrite::Outcome::kRewritten);
  CHECK(decode<codec::ShareFetchResponse>(f.out, 1).node_endpoints[0].port == 19001);
  codec::ShareAcknowledgeResponse sa;
  one_endpoint(sa.node_endpoints, 1, "real-1");
  REQUIRE(f.run(sa, 1) == BrokerAddressRewrite::Outcome::kRewritten);
  CHECK(decode<codec::ShareAcknowledgeResponse>(f.out, 1).node_endpoints[0].host == "proxy.local");
}

TEST_CASE("DescribeQuorum v2: known brokers mapped, controller-only endpoints masked") {
  Fixture f;
  codec::MetadataResponse m;
  m.brokers.resize(1);
  m.brokers[0].node_id = 1;
  m.brokers[0].host = "10.0.0.1";
  m.brokers[0].port = 9092;
  REQUIRE(f.run(m, 12) == BrokerAddressRewrite::Outcome::kRewritten);
  codec::DescribeQuorumResponse q;
  q.nodes.resize(1);
  q.nodes[0].node_id = 1;
  q.nodes[0].listeners.resize(2);
  q.nodes[0].listeners[0].name = "PLAINTEXT";
  q.nodes[0].listeners[0].host = "10.0.0.1";
  q.nodes[0].listeners[0].port = 9092;
  q.nodes[0].listeners[1].name = "CONTROLLER";
  q.nodes[0].listeners[1].host = "10.0.0.1";
  q.nodes[0].listeners[1].port = 9093;
  REQUIRE(f.run(q, 2) == BrokerAddressRewrite::Outcome::kRewritten);
  auto got = decode<codec::DescribeQuorumResponse>(f.out, 2);
  CHECK(got.nodes[0].listeners[0].port == 19001);
  CHECK(got.nodes[0].listeners[1].host == "proxy.local");
  CHECK(got.nodes[0].listeners[1].port == 0);
}

TEST_CASE("failures: undecodable body, no port left") {
  Fixture f;
  codec::MetadataResponse m;
  m.brokers.resize(1);
  m.brokers[0].node_id = 1;
  m.brokers[0].host = "10.0.0.1";
  m.brokers[0].port = 9092;
  auto frame = response_frame(m, 12);
  frame.resize(frame.size() - 3);
  CHECK(f.rewrite.rewrite(3, 12, 1, frame, f.out, f.added, f.error) == BrokerAddressRewrite::Outcome::kFailed);
  CHECK_FALSE(f.error.empty());

  config::BrokerPorts one_port;
  one_port.scheme = config::BrokerPorts::Scheme::kInOrder;
  one_port.first = one_port.last = 20000;
  BrokerDirectory small(one_port);
  BrokerAddressRewrite rewrite(small, "proxy.local");
  m.brokers.resize(2);
  m.brokers[1].node_id = 2;
  m.brokers[1].host = "10.0.0.2";
  m.brokers[1].port = 9092;
  auto two = response_frame(m, 12);
  std::string error;
  CHECK(rewrite.rewrite(3, 12, 1, two, f.out, f.added, error) == BrokerAddressRewrite::Outcome::kFailed);
  CHECK(error.find("no kproxy port") != std::string::npos);
}

TEST_CASE("a broker's impossible address is refused, never passed on, and blamed on the broker") {
  // Issue #15: node id -5 went to the client unrewritten (the client would bypass kproxy); port
  // 70000 or -1 was blamed on kproxy's broker_ports; a 30 KB host name went into log lines.
  auto refused = [](int32_t node_id, std::string host, int32_t port) {
    Fixture f;
    codec::MetadataResponse m;
    m.brokers.resize(1);
    m.brokers[0].node_id = node_id;
    m.brokers[0].host = host;
    m.brokers[0].port = port;
    CHECK(f.run(m, 12) == BrokerAddressRewrite::Outcome::kFailed);
    CHECK(f.out.empty());
    CHECK(f.directory.routes().empty());
    return f.error;
  };
  CHECK(refused(-5, "10.0.0.1", 9092) ==
        "the broker names node id -5 at 10.0.0.1:9092 (a negative node id names no broker: a broker bug or a corrupt response)");
  CHECK(refused(1, "10.0.0.1", 70000) ==
        "broker node 1 advertises port 70000 for 10.0.0.1, which is not a TCP port (a broker bug or a corrupt response)");
  CHECK(refused(1, "10.0.0.1", -1).starts_with("broker node 1 advertises port -1 for 10.0.0.1, which is not a TCP port"));
  CHECK(refused(1, "10.0.0.1", 0).find("not a TCP port") != std::string::npos);
  std::string error = refused(1, std::string(30000, 'h'), 9092);
  CHECK(error.starts_with("broker node 1 advertises a host name of 30000 bytes (" + std::string(64, 'h') + "...), longer than"));
  CHECK(error.size() < 200);
  CHECK(refused(2, std::string("bad\nhost"), 70000).find("bad?host") != std::string::npos);
}

TEST_CASE("which APIs are rewritten") {
  CHECK(BrokerAddressRewrite::applies_to(3));
  CHECK(BrokerAddressRewrite::applies_to(10));
  CHECK(BrokerAddressRewrite::applies_to(60));
  CHECK_FALSE(BrokerAddressRewrite::applies_to(18));
  CHECK_FALSE(BrokerAddressRewrite::applies_to(29));  // DescribeAcls: its Host fields are ACL hosts
}

TEST_CASE("Produce and Fetch without NodeEndpoints are scanned, not decoded; the scan is handed on") {
  Fixture f;
  codec::ProduceResponse produce;
  auto& partition = produce.responses.emplace_back().partition_responses.emplace_back();
  partition.index = 0;
  partition.error_code = 6;  // NOT_LEADER_OR_FOLLOWER
  auto frame = response_frame(produce, 12);
  std::optional<codec::ResponseScan> scanned;
  CHECK(f.rewrite.rewrite(0, 12, 1, frame, f.out, f.added, f.error, &scanned) == BrokerAddressRewrite::Outcome::kUnchanged);
  REQUIRE(scanned);
  REQUIRE(scanned->error_count == 1);
  CHECK(scanned->errors[0].code == 6);
  CHECK(f.out.empty());

  // With NodeEndpoints: decoded and rewritten; no scan is handed on (it describes other bytes).
  one_endpoint(produce.node_endpoints, 4, "real-4");
  auto with_nodes = response_frame(produce, 12);
  CHECK(f.rewrite.rewrite(0, 12, 1, with_nodes, f.out, f.added, f.error, &scanned) == BrokerAddressRewrite::Outcome::kRewritten);
  CHECK_FALSE(scanned);
  CHECK(decode<codec::ProduceResponse>(f.out, 12).node_endpoints[0].port == 19004);

  // A body that does not scan goes to the decoder, which says what is wrong.
  auto cut = response_frame(codec::FetchResponse{}, 16);
  cut.resize(cut.size() - 1);
  f.error.clear();
  CHECK(f.rewrite.rewrite(1, 16, 1, cut, f.out, f.added, f.error, &scanned) == BrokerAddressRewrite::Outcome::kFailed);
  CHECK_FALSE(scanned);
  CHECK_FALSE(f.error.empty());

  codec::FetchResponse fetch;
  fetch.responses.emplace_back().partitions.emplace_back().error_code = 1;  // OFFSET_OUT_OF_RANGE
  auto fetch_frame = response_frame(fetch, 17);
  CHECK(f.rewrite.rewrite(1, 17, 1, fetch_frame, f.out, f.added, f.error, &scanned) == BrokerAddressRewrite::Outcome::kUnchanged);
  REQUIRE(scanned);
  CHECK(scanned->error_count == 1);
}

namespace {

/// An SNI listener's rewrite: every broker at its pattern's name and the one advertised port 443.
struct SniFixture : Fixture {
  static config::BrokerPorts sni_ports() {
    config::BrokerPorts p;
    p.scheme = config::BrokerPorts::Scheme::kSni;
    p.base = 443;
    return p;
  }
  BrokerDirectory sni_directory{sni_ports()};
  BrokerAddressRewrite sni_rewrite{sni_directory, "kafka.example.com",
                                   *config::BrokerHostPattern::make("broker-$(nodeId).kafka.example.com", nullptr)};

  template <class M>
  BrokerAddressRewrite::Outcome run_sni(const M& body, int16_t version) {
    auto frame = response_frame(body, version);
    out.clear();
    added.clear();
    return sni_rewrite.rewrite(M::kApiKey, version, codec::response_header_version(M::kApiKey, version), frame, out, added, error);
  }
};

}  // namespace

TEST_CASE("SNI listener: Metadata, FindCoordinator, DescribeCluster and NodeEndpoints name broker-N at the advertised port") {
  SniFixture f;
  codec::MetadataResponse m;
  m.brokers.resize(2);
  m.brokers[0].node_id = 1;
  m.brokers[0].host = "10.0.0.1";
  m.brokers[0].port = 9092;
  m.brokers[1].node_id = 300;
  m.brokers[1].host = "10.0.0.3";
  m.brokers[1].port = 9094;
  REQUIRE(f.run_sni(m, 12) == BrokerAddressRewrite::Outcome::kRewritten);
  auto got = decode<codec::MetadataResponse>(f.out, 12);
  CHECK(got.brokers[0].host == "broker-1.kafka.example.com");
  CHECK(got.brokers[0].port == 443);
  CHECK(got.brokers[1].host == "broker-300.kafka.example.com");
  CHECK(got.brokers[1].port == 443);
  CHECK(f.added.empty());  // no port to open
  // The directory knows where node 300 really is, by node id.
  REQUIRE(f.sni_directory.route_for_node(300).has_value());
  CHECK(f.sni_directory.route_for_node(300)->real == config::HostPort{"10.0.0.3", 9094});
  CHECK_FALSE(f.sni_directory.route_for_node(2).has_value());

  codec::FindCoordinatorResponse fc;
  fc.coordinators.resize(1);
  fc.coordinators[0].key = "group";
  fc.coordinators[0].node_id = 300;
  fc.coordinators[0].host = "10.0.0.3";
  fc.coordinators[0].port = 9094;
  REQUIRE(f.run_sni(fc, 4) == BrokerAddressRewrite::Outcome::kRewritten);
  auto gfc = decode<codec::FindCoordinatorResponse>(f.out, 4);
  CHECK(gfc.coordinators[0].host == "broker-300.kafka.example.com");
  CHECK(gfc.coordinators[0].port == 443);

  codec::DescribeClusterResponse dc;
  dc.brokers.resize(1);
  dc.brokers[0].broker_id = 1;
  dc.brokers[0].host = "10.0.0.1";
  dc.brokers[0].port = 9092;
  REQUIRE(f.run_sni(dc, 0) == BrokerAddressRewrite::Outcome::kRewritten);
  CHECK(decode<codec::DescribeClusterResponse>(f.out, 0).brokers[0].host == "broker-1.kafka.example.com");

  codec::ProduceResponse p;
  one_endpoint(p.node_endpoints, 1, "10.0.0.1");
  REQUIRE(f.run_sni(p, 10) == BrokerAddressRewrite::Outcome::kRewritten);
  auto gp = decode<codec::ProduceResponse>(f.out, 10);
  CHECK(gp.node_endpoints[0].host == "broker-1.kafka.example.com");
  CHECK(gp.node_endpoints[0].port == 443);

  // A broker that moved: the directory follows it, the name clients are told stays.
  m.brokers[0].host = "10.0.0.9";
  REQUIRE(f.run_sni(m, 12) == BrokerAddressRewrite::Outcome::kRewritten);
  CHECK(decode<codec::MetadataResponse>(f.out, 12).brokers[0].host == "broker-1.kafka.example.com");
  CHECK(f.sni_directory.route_for_node(1)->real == config::HostPort{"10.0.0.9", 9092});
  CHECK(f.added.empty());
}

TEST_CASE("SNI listener: DescribeQuorum names a known broker by its name, masks the rest as the bootstrap name:0") {
  SniFixture f;
  codec::MetadataResponse m;
  m.brokers.resize(1);
  m.brokers[0].node_id = 1;
  m.brokers[0].host = "10.0.0.1";
  m.brokers[0].port = 9092;
  REQUIRE(f.run_sni(m, 12) == BrokerAddressRewrite::Outcome::kRewritten);
  codec::DescribeQuorumResponse q;
  q.nodes.resize(1);
  q.nodes[0].node_id = 1;
  q.nodes[0].listeners.resize(2);
  q.nodes[0].listeners[0].host = "10.0.0.1";
  q.nodes[0].listeners[0].port = 9092;
  q.nodes[0].listeners[1].host = "10.0.0.1";
  q.nodes[0].listeners[1].port = 9093;
  REQUIRE(f.run_sni(q, 2) == BrokerAddressRewrite::Outcome::kRewritten);
  auto got = decode<codec::DescribeQuorumResponse>(f.out, 2);
  CHECK(got.nodes[0].listeners[0].host == "broker-1.kafka.example.com");
  CHECK(got.nodes[0].listeners[0].port == 443);
  CHECK(got.nodes[0].listeners[1].host == "kafka.example.com");
  CHECK(got.nodes[0].listeners[1].port == 0);
}
