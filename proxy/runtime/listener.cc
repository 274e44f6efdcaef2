#include "proxy/runtime/listener.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/self_connection.h"
#include "proxy/runtime/worker.h"
#include "proxy/util/log_throttle.h"

namespace kproxy::runtime {

Listener::Listener(Worker& worker, connection::ListenerSpec spec)
    : worker_(worker), spec_(std::make_shared<const connection::ListenerSpec>(std::move(spec))) {}

Listener::~Listener() {
  if (bound_.ss_family != AF_UNSPEC) worker_.services().self_connections.listener_closed(bound_);
}

std::string Listener::open() {
  sockaddr_storage addr{};
  if (uv_ip4_addr(spec_->host.c_str(), spec_->port, reinterpret_cast<sockaddr_in*>(&addr)) != 0 &&
      uv_ip6_addr(spec_->host.c_str(), spec_->port, reinterpret_cast<sockaddr_in6*>(&addr)) != 0) {
    return "listen address '" + spec_->host + "' is not an IP address";
  }
  int rc = handle_.init(worker_.loop(), this, uv_tcp_init_ex, static_cast<unsigned>(addr.ss_family));
  if (rc < 0) return std::string("cannot create a socket: ") + uv_strerror(rc);
  rc = uv_tcp_bind(handle_.get(), reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc < 0) return "cannot listen on " + spec_->host + ":" + std::to_string(spec_->port) + ": " + uv_strerror(rc);
  return listen();
}

std::string Listener::open_shared(int bound_fd) {
  int fd = ::dup(bound_fd);
  if (fd < 0) return std::string("cannot share the listening socket: ") + std::strerror(errno);
  int rc = handle_.init(worker_.loop(), this, uv_tcp_init);
  if (rc == 0) rc = uv_tcp_open(handle_.get(), fd);
  if (rc < 0) {
    ::close(fd);
    handle_.reset();
    return std::string("cannot share the listening socket: ") + uv_strerror(rc);
  }
  return listen();
}

std::string Listener::listen() {
  int rc = uv_listen(handle_.stream(), 511, on_connection);
  if (rc < 0) return "cannot listen on " + spec_->host + ":" + std::to_string(spec_->port) + ": " + uv_strerror(rc);
  int len = sizeof(bound_);
  if (uv_tcp_getsockname(handle_.get(), reinterpret_cast<sockaddr*>(&bound_), &len) == 0) {
    worker_.services().self_connections.listener_opened(bound_);
  } else {
    bound_.ss_family = AF_UNSPEC;
  }
  return "";
}

int Listener::fd() const {
  uv_os_fd_t fd = -1;
  if (!handle_.open() || uv_fileno(handle_.base(), &fd) != 0) return -1;
  return fd;
}

void Listener::on_connection(uv_stream_t* server, int status) {
  auto* self = static_cast<Listener*>(server->data);
  if (status < 0) {
    // EMFILE/ENFILE: libuv accepted and closed the connection to keep the backlog moving, so the
    // client saw a reset. Every one is counted; the log says it once per 5 s.
    self->worker_.services().metrics.count(metrics::ProxyEvent::kAcceptFailure);
    static util::LogThrottle throttle(std::chrono::seconds(5));
    uint64_t suppressed = 0;
    if (throttle.allow(&suppressed)) {
      spdlog::error(
          "listener={} accept failed, the connection was dropped: {}{}{}", self->spec_->label(), uv_strerror(status),
          status == UV_EMFILE || status == UV_ENFILE ? " (raise the open-file limit, RLIMIT_NOFILE, or lower limits.max_connections)" : "",
          util::LogThrottle::suppressed_note(suppressed));
    }
    return;
  }
  self->worker_.accept(server, self->spec_);
}

}  // namespace kproxy::runtime
