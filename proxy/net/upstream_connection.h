// UpstreamConnection: the proxy's connection to a broker on behalf of one client connection.
//
// It resolves the broker's host (uv_getaddrinfo, off the loop thread), connects, and gives up
// after the configured connect timeout (which on a TLS stream also covers the handshake). Its TcpStream reports data and errors to the
// owning ClientConnection like the client side does; this class only owns the connect phase and the handles that belong to it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <uv.h>

#include "config/host_port.h"
#include "proxy/net/self_connection.h"
#include "proxy/net/tcp_stream.h"
#include "proxy/net/uv_handle.h"

namespace kproxy::net {

/// What an UpstreamConnection reports to its owner, on the loop thread.
class UpstreamConnectionEvents {
 public:
  virtual ~UpstreamConnectionEvents() = default;
  virtual void on_upstream_connected() = 0;
  /// Resolve or connect failed, or timed out; `reason` says which and why.
  virtual void on_upstream_connect_failed(const std::string& reason) = 0;
  /// The broker resolved to an address kproxy itself listens on (proxy/net/self_connection.h): no
  /// connection was made. `detail` names the target and the address.
  virtual void on_upstream_is_self(const std::string& detail) { on_upstream_connect_failed(detail); }
  /// One of the upstream's handles or requests finished closing (see released()).
  virtual void on_upstream_part_released() = 0;
};

class UpstreamConnection {
 public:
  /// `self_connections`: a target that is one of kproxy's own listening sockets is refused.
  UpstreamConnection(uv_loop_t* loop, TcpStreamEvents& stream_events, UpstreamConnectionEvents& events,
                     const SelfConnectionDetector& self_connections);
  UpstreamConnection(const UpstreamConnection&) = delete;
  UpstreamConnection& operator=(const UpstreamConnection&) = delete;

  /// Starts resolving and connecting to `target`.
  void connect(const config::HostPort& target, std::chrono::milliseconds timeout);

  TcpStream& stream() { return stream_; }
  const config::HostPort& target() const { return target_; }

  /// The TLS handshake with the broker completed: the connect timeout, which covers it on a TLS
  /// stream (a listener that accepts and never answers would otherwise hang the client), stops.
  void handshake_done() { timer_.close(); }

  /// Closes the socket and timer and cancels a pending resolve. With `flush_first`, bytes queued
  /// for the broker are written before the socket closes.
  void close(bool flush_first);
  /// True once the socket is closed and no resolve is pending: the object may be destroyed (the
  /// connect timer's handle is freed by its UvHandle whenever libuv is done with it).
  bool released() const { return stream_.closed() && !resolving_; }

 private:
  static void after_resolve(uv_getaddrinfo_t* req, int status, addrinfo* res);
  static void after_connect(uv_connect_t* req, int status);
  static void on_connect_timeout(uv_timer_t* t);
  void fail(const std::string& reason);

  uv_loop_t* loop_;
  UpstreamConnectionEvents& events_;
  const SelfConnectionDetector& self_connections_;
  TcpStream stream_;
  /// The libuv requests of resolving and connecting: allocated by connect(), freed once connected
  /// (or failed), so an established connection does not carry them (bench/proxy: idle memory).
  struct Dialing {
    uv_getaddrinfo_t resolve{};
    uv_connect_t connect{};
  };

  UvHandle<uv_timer_t> timer_;  ///< the connect (and TLS handshake) timeout; closed once connected
  std::unique_ptr<Dialing> dialing_;
  config::HostPort target_;
  bool resolving_ = false;
  bool closed_ = false;
};

}  // namespace kproxy::net
