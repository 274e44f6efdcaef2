#include "proxy/net/upstream_connection.h"

#include <cstring>

#include "proxy/net/self_connection.h"

namespace kproxy::net {

UpstreamConnection::UpstreamConnection(uv_loop_t* loop, TcpStreamEvents& stream_events, UpstreamConnectionEvents& events,
                                       const SelfConnectionDetector& self_connections)
    : loop_(loop), events_(events), self_connections_(self_connections), stream_(loop, stream_events, "upstream") {
  timer_.init(loop, this, uv_timer_init);
}

void UpstreamConnection::connect(const config::HostPort& target, std::chrono::milliseconds timeout) {
  target_ = target;
  uv_timer_start(timer_.get(), on_connect_timeout, static_cast<uint64_t>(timeout.count()), 0);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  dialing_ = std::make_unique<Dialing>();
  dialing_->resolve.data = this;
  std::string port = std::to_string(target.port);
  int rc = uv_getaddrinfo(loop_, &dialing_->resolve, after_resolve, target.host.c_str(), port.c_str(), &hints);
  if (rc < 0) {
    fail("cannot resolve " + target.to_string() + ": " + uv_strerror(rc));
    return;
  }
  resolving_ = true;
}

void UpstreamConnection::after_resolve(uv_getaddrinfo_t* req, int status, addrinfo* res) {
  auto* self = static_cast<UpstreamConnection*>(req->data);
  self->resolving_ = false;
  if (self->closed_) {
    uv_freeaddrinfo(res);
    self->events_.on_upstream_part_released();
    return;
  }
  if (status < 0 || res == nullptr) {
    uv_freeaddrinfo(res);
    self->fail("cannot resolve " + self->target_.to_string() + ": " + uv_strerror(status));
    return;
  }
  if (self->self_connections_.is_own_listener(res->ai_addr)) {
    uv_freeaddrinfo(res);
    self->events_.on_upstream_is_self("broker " + self->target_.to_string() + " resolves to an address kproxy listens on");
    return;
  }
  self->dialing_->connect.data = self;
  int rc = uv_tcp_connect(&self->dialing_->connect, self->stream_.handle(), res->ai_addr, after_connect);
  uv_freeaddrinfo(res);
  if (rc < 0) {
    self->fail("cannot connect to " + self->target_.to_string() + ": " + uv_strerror(rc));
    return;
  }
}

void UpstreamConnection::after_connect(uv_connect_t* req, int status) {
  auto* self = static_cast<UpstreamConnection*>(req->data);
  self->dialing_.reset();  // libuv is done with both requests (req is gone from here on)
  if (self->closed_) return;
  if (status < 0) {
    self->fail("cannot connect to " + self->target_.to_string() + ": " + uv_strerror(status));
    return;
  }
  if (self->stream_.tls() == nullptr) self->timer_.close();  // else at handshake_done()
  uv_tcp_nodelay(self->stream_.handle(), 1);
  self->stream_.set_connected();
  self->events_.on_upstream_connected();
}

void UpstreamConnection::on_connect_timeout(uv_timer_t* t) {
  auto* self = static_cast<UpstreamConnection*>(t->data);
  if (self->stream_.connected()) {
    self->fail("TLS handshake with " + self->target_.to_string() + " timed out (the broker never answered the ClientHello)");
    return;
  }
  self->fail("connecting to " + self->target_.to_string() + " timed out");
}

void UpstreamConnection::fail(const std::string& reason) {
  if (closed_) return;
  events_.on_upstream_connect_failed(reason);
}

void UpstreamConnection::close(bool flush_first) {
  if (closed_) return;
  closed_ = true;
  if (resolving_) uv_cancel(reinterpret_cast<uv_req_t*>(&dialing_->resolve));
  timer_.close();
  if (flush_first) stream_.shutdown_and_close();
  else stream_.close();
}

}  // namespace kproxy::net
