#include "proxy/net/bound_socket.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>

#include <uv.h>

#include "config/host_port.h"

namespace kproxy::net {

BoundSocket bind_tcp_socket(const std::string& host, uint16_t port) {
  BoundSocket out;
  const std::string where = config::HostPort{host, port}.to_string();
  sockaddr_storage addr{};
  if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&addr)) != 0 &&
      uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&addr)) != 0) {
    out.error = "listen address '" + host + "' is not an IP address";
    return out;
  }
  OwnedDescriptor fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    out.error = std::string("cannot create a socket: ") + uv_strerror(uv_translate_sys_error(errno));
    return out;
  }
  int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  socklen_t len = addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    out.error = "cannot listen on " + where + ": " + uv_strerror(uv_translate_sys_error(errno));
    return out;
  }
  out.port = local_port(fd.get());
  out.socket = std::move(fd);
  return out;
}

uint16_t local_port(int fd) {
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (fd < 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) return 0;
  if (bound.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
  return 0;
}

}  // namespace kproxy::net
