#include "proxy/cli/admin_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "config/host_port.h"

namespace kproxy::cli {

int connect_admin(const std::string& admin, std::string& error) {
  auto parsed = config::parse_host_port(admin, nullptr);
  if (!parsed) {
    error = "bad admin address '" + admin + "' (expected HOST:PORT)";
    return -1;
  }
  std::string host = parsed->host, port = std::to_string(parsed->port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found) {
    error = "cannot resolve " + admin;
    return -1;
  }
  int fd = ::socket(found->ai_family, SOCK_STREAM, 0);
  if (fd < 0 || ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    error = "cannot connect to " + admin + ": " + std::strerror(errno) + " (is kproxy running with admin.listen set?)";
    if (fd >= 0) ::close(fd);
    freeaddrinfo(found);
    return -1;
  }
  freeaddrinfo(found);
  return fd;
}

std::string admin_request_head(std::string_view method, std::string_view path_and_query, std::string_view admin, std::string_view token) {
  std::string head;
  head.append(method).append(" ").append(path_and_query).append(" HTTP/1.1\r\nHost: ").append(admin).append("\r\nConnection: close\r\n");
  if (!token.empty()) head.append("Authorization: Bearer ").append(token).append("\r\n");
  return head;
}

bool send_all(int fd, std::string_view data) {
  for (size_t sent = 0; sent < data.size();) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace kproxy::cli
