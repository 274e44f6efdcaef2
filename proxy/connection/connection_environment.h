// ConnectionEnvironment: everything a client connection asks of the process around it, and no
// more. The worker that serves the connection implements it (proxy/runtime/worker.h), so the
// connection layer never reaches the Proxy, its workers or their listeners:
//
//   runtime:     Proxy ──► Worker ──implements──► ConnectionEnvironment
//   connection:  ClientConnection ──uses──► ConnectionEnvironment
//
// Every call is made on the loop thread of the connection (the worker's loop).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include <uv.h>

#include "codec/frame_memory_budget.h"
#include "config/host_port.h"
#include "proxy/chaos/rule_set.h"
#include "proxy/cluster/broker_address_rewrite.h"
#include "proxy/stage/services.h"
#include "proxy/tls/listener_tls.h"

namespace kproxy::connection {

class ClientConnection;
class ReadPressure;

class ConnectionEnvironment {
 public:
  virtual ~ConnectionEnvironment() = default;

  /// The loop the connection lives on.
  virtual uv_loop_t* loop() = 0;
  /// The process's services: metrics, topic names, the self-connection detector, the frame
  /// observer, the clock (proxy/stage/services.h).
  virtual const stage::Services& services() = 0;
  /// Memory every connection's FrameReaders may hold for partial frames (limits.max_buffered_frame_bytes).
  virtual codec::FrameMemoryBudget& frame_budget() = 0;
  /// The loop's read pressure: pauses the clients holding the most partial bytes while the frame
  /// budget is over its limit (proxy/connection/read_pressure.h).
  virtual ReadPressure& read_pressure() = 0;
  /// Announced bytes of all requests forwarded while they arrive (limits.max_streamed_request_bytes):
  /// what brokers hold for requests not yet whole. Never limited by 0: a limit of 0 means no streaming.
  virtual codec::FrameMemoryBudget& streamed_budget() = 0;
  /// Fault rules and ApiVersions policy; the pipeline reads its current snapshot per frame.
  virtual chaos::LiveRules& live_rules() = 0;
  /// The broker-address rewrite of listener `listener_index`.
  virtual const cluster::BrokerAddressRewrite& rewrite(size_t listener_index) = 0;
  /// The TLS contexts of listener `listener_index` as of now (a reload applies to later connections).
  virtual tls::ListenerTls listener_tls(size_t listener_index) = 0;
  /// Where broker `node_id` of listener `listener_index` really is, if a response named it (an
  /// SNI listener's connection for that broker's name connects there).
  virtual std::optional<config::HostPort> broker_address(size_t listener_index, int32_t node_id) = 0;
  /// A response named broker `node_id`, reached at `port`, that has no port yet: open it.
  virtual void open_broker_port(size_t listener_index, int32_t node_id, uint16_t port) = 0;
  /// A connect to bootstrap server `target` failed: later connections try the next one.
  virtual void bootstrap_unreachable(size_t listener_index, const config::HostPort& target) = 0;
  /// The connection is gone: its slot under limits.max_connections is free again.
  virtual void release_connection_slot() = 0;
  /// A TLS handshake of one of the connection's streams finished: it freed far more than the
  /// session keeps, which counts toward giving memory back (proxy/runtime/memory_return.h).
  virtual void tls_handshake_done() = 0;
  /// `waiter`, on an SNI listener, names a broker node that no response named yet: ask `bootstrap`
  /// for the cluster's brokers (proxy/runtime/broker_discovery.h; one request per listener at a
  /// time, `timeout` long), learn them, then call waiter->brokers_discovered() (not once it was
  /// forgotten).
  virtual void discover_brokers(size_t listener_index, const config::HostPort& bootstrap,
                                std::shared_ptr<const tls::TlsContext> upstream_tls, std::chrono::milliseconds timeout,
                                ClientConnection* waiter) = 0;
  /// libuv is done with every handle of `connection`: forget it (it deletes itself next).
  virtual void forget(ClientConnection* connection) = 0;
};

}  // namespace kproxy::connection
