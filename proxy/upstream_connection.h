// UpstreamConnection: the proxy's connection to a broker on behalf of one client connection.
//
// It resolves the broker's host (uv_getaddrinfo, off the loop thread), connects, and gives up
// after the configured connect timeout (which on a TLS stream also covers the handshake). Its TcpStream reports data and errors to the owning
// ClientConnection like the client side does; this class only owns the connect phase and the
// handles that belong to it.
#pragma once

#include <chrono>
#include <string>

#include <uv.h>

#include "config/host_port.h"
#include "proxy/tcp_stream.h"

namespace kproxy::proxy {

/// What an UpstreamConnection reports to its owner, on the loop thread.
class UpstreamConnectionEvents {
 public:
  virtual ~UpstreamConnectionEvents() = default;
  virtual void on_upstream_connected() = 0;
  /// Resolve or connect failed, or timed out; `reason` says which and why.
  virtual void on_upstream_connect_failed(const std::string& reason) = 0;
  /// One of the upstream's handles or requests finished closing (see released()).
  virtual void on_upstream_part_released() = 0;
};

class UpstreamConnection {
 public:
  UpstreamConnection(uv_loop_t* loop, TcpStreamEvents& stream_events, UpstreamConnectionEvents& events);
  UpstreamConnection(const UpstreamConnection&) = delete;
  UpstreamConnection& operator=(const UpstreamConnection&) = delete;

  /// Starts resolving and connecting to `target`.
  void connect(const config::HostPort& target, std::chrono::milliseconds timeout);

  TcpStream& stream() { return stream_; }
  const config::HostPort& target() const { return target_; }

  /// The TLS handshake with the broker completed: the connect timeout, which covers it on a TLS
  /// stream (a listener that accepts and never answers would otherwise hang the client), stops.
  void handshake_done() { uv_timer_stop(&timer_); }

  /// Closes the socket and timer and cancels a pending resolve. With `flush_first`, bytes queued
  /// for the broker are written before the socket closes.
  void close(bool flush_first);
  /// True once every handle is closed and no request is pending: the object may be destroyed.
  bool released() const { return stream_.closed() && timer_closed_ && !resolving_; }

 private:
  static void after_resolve(uv_getaddrinfo_t* req, int status, addrinfo* res);
  static void after_connect(uv_connect_t* req, int status);
  static void on_connect_timeout(uv_timer_t* t);
  static void on_timer_closed(uv_handle_t* h);
  void fail(const std::string& reason);

  uv_loop_t* loop_;
  UpstreamConnectionEvents& events_;
  TcpStream stream_;
  uv_timer_t timer_;
  uv_getaddrinfo_t resolve_req_{};
  uv_connect_t connect_req_{};
  config::HostPort target_;
  bool resolving_ = false;
  bool connecting_ = false;
  bool timer_closed_ = false;
  bool closed_ = false;
};

}  // namespace kproxy::proxy
