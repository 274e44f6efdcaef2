#include "proxy/listener.h"

#include <sys/socket.h>

#include <spdlog/spdlog.h>

#include "proxy/worker.h"

namespace kproxy::proxy {

Listener::Listener(Worker& worker, ListenerSpec spec) : worker_(worker), spec_(std::move(spec)) {
  handle_.data = this;
}

std::string Listener::open() {
  sockaddr_storage addr{};
  if (uv_ip4_addr(spec_.host.c_str(), spec_.port, reinterpret_cast<sockaddr_in*>(&addr)) != 0 &&
      uv_ip6_addr(spec_.host.c_str(), spec_.port, reinterpret_cast<sockaddr_in6*>(&addr)) != 0) {
    uv_tcp_init(worker_.loop(), &handle_);
    return "listen address '" + spec_.host + "' is not an IP address";
  }
  int rc = uv_tcp_init_ex(worker_.loop(), &handle_, addr.ss_family);
  if (rc < 0) {
    uv_tcp_init(worker_.loop(), &handle_);
    return std::string("cannot create a socket: ") + uv_strerror(rc);
  }
  uv_os_fd_t fd;
  uv_fileno(reinterpret_cast<uv_handle_t*>(&handle_), &fd);
  int one = 1;
  // libuv 1.44 has no UV_TCP_REUSEPORT: set it on the socket before bind.
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) return "cannot set SO_REUSEPORT";
  rc = uv_tcp_bind(&handle_, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&handle_), 511, on_connection);
  if (rc < 0) return "cannot listen on " + spec_.host + ":" + std::to_string(spec_.port) + ": " + uv_strerror(rc);
  return "";
}

void Listener::close() {
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_), on_close);
}

void Listener::on_close(uv_handle_t* h) {
  delete static_cast<Listener*>(h->data);
}

void Listener::on_connection(uv_stream_t* server, int status) {
  auto* self = static_cast<Listener*>(server->data);
  if (status < 0) {
    spdlog::warn("listener={} accept failed: {}", self->spec_.label(), uv_strerror(status));
    return;
  }
  self->worker_.accept(server, self->spec_);
}

}  // namespace kproxy::proxy
