// BrokerDiscovery: kproxy asks a listener's bootstrap broker for the cluster's brokers itself.
//
// An SNI listener routes a connection for `broker-N.<domain>` by node id to the address a
// Metadata response named for node N (proxy/cluster/broker_directory.h). A replica that has not
// carried such a response yet (it just started, or its clients got their metadata through another
// replica behind the same load balancer) knows no node. Serving that connection at the bootstrap
// would put the client on the wrong broker: a Kafka 4.4 client names the node it means to reach in
// ApiVersions v5 (KIP-1242) and rebootstraps on REBOOTSTRAP_REQUIRED, which drops every
// connection it has. So the worker first sends the bootstrap a Metadata request of its own (no
// topics: brokers only), over the listener's upstream TLS if it has one, and learns every broker
// in the answer; then the waiting connection routes again.
//
//   connect (resolve, TCP, TLS: UpstreamConnection) ──► MetadataRequest v12 ──► one response frame
//     ──► done(brokers, "")        or  done({}, why) on a failure, a close or `timeout`
//
// It cannot work where the broker requires authentication before Metadata (a SASL listener):
// the broker closes the connection, `done` says so, and the connection is served at the
// bootstrap as before (config/README.md "SNI listeners").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codec/reader.h"
#include "config/host_port.h"
#include "proxy/net/deadline_timer.h"
#include "proxy/net/upstream_connection.h"
#include "proxy/stage/services.h"
#include "proxy/tls/tls_context.h"

namespace kproxy::runtime {

/// A broker as the bootstrap's Metadata response named it.
struct DiscoveredBroker {
  int32_t node_id = -1;
  std::string host;
  int32_t port = 0;
};

/// Parses one Metadata response frame (after its size prefix) to MetadataRequest v12 with
/// correlation id `correlation_id`: its brokers, or "" brokers and `error` set.
std::vector<DiscoveredBroker> parse_discovery_response(codec::Bytes frame, int32_t correlation_id, std::string& error);

/// The whole MetadataRequest v12 frame (size prefix, header v2, no topics) discovery sends.
std::vector<uint8_t> discovery_request_frame(int32_t correlation_id);

class BrokerDiscovery final : private net::TcpStreamEvents, private net::UpstreamConnectionEvents {
 public:
  /// The correlation id of the one request a discovery sends.
  static constexpr int32_t kCorrelationId = 0x6b707279;
  /// `brokers` is empty when `error` says why.
  using Done = std::function<void(std::vector<DiscoveredBroker> brokers, const std::string& error)>;

  /// `done` runs once, on the loop's thread (possibly within start(), when the connect fails at
  /// once); the object may be destroyed when released() says so (after done, or after cancel()).
  /// `services`: the self-connection detector the connect checks, the clock of the deadline.
  BrokerDiscovery(uv_loop_t* loop, const stage::Services& services, Done done);
  /// Connects to `bootstrap` and asks. `upstream_tls`: the listener's upstream TLS context, or
  /// null for plaintext. `timeout` bounds the whole exchange.
  void start(const config::HostPort& bootstrap, std::shared_ptr<const tls::TlsContext> upstream_tls, std::chrono::milliseconds timeout);
  BrokerDiscovery(const BrokerDiscovery&) = delete;
  BrokerDiscovery& operator=(const BrokerDiscovery&) = delete;

  /// Stops without calling `done` (the worker shuts down).
  void cancel();
  /// True once every libuv handle and request is given back: the object may be destroyed.
  bool released() const { return upstream_.released(); }
  const config::HostPort& bootstrap() const { return upstream_.target(); }

 private:
  void finish(std::vector<DiscoveredBroker> brokers, const std::string& error);
  // TcpStreamEvents
  void on_stream_read(net::TcpStream& s, codec::Bytes data) override;
  void on_stream_error(net::TcpStream& s, int status, const char* during) override;
  void on_stream_writable(net::TcpStream&) override {}
  void on_stream_closed(net::TcpStream&) override {}
  void on_stream_tls_failed(net::TcpStream& s, const std::string& reason) override;
  void on_stream_tls_established(net::TcpStream&) override { upstream_.handshake_done(); }
  // UpstreamConnectionEvents
  void on_upstream_connected() override;
  void on_upstream_connect_failed(const std::string& reason) override { finish({}, reason); }
  void on_upstream_part_released() override {}

  /// A response frame larger than this is not a brokers-only Metadata answer.
  static constexpr size_t kMaxResponseBytes = 4 << 20;

  const util::Clock& clock_;
  net::UpstreamConnection upstream_;
  net::DeadlineTimer deadline_;
  Done done_;
  std::vector<uint8_t> received_;
  bool finished_ = false;
};

}  // namespace kproxy::runtime
