#include "proxy/cli/admin_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
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

bool read_response(int fd, const std::function<bool(int status)>& on_status, const std::function<bool(std::string_view)>& on_body,
                   std::string& error) {
  std::string buffer;
  bool head_done = false, chunked = false;
  char piece[65536];
  // Hands over what `buffer` holds of the body; false once the last chunk came or a callback said stop.
  auto deliver = [&]() -> bool {
    if (!chunked) {
      bool go_on = buffer.empty() || on_body(buffer);
      buffer.clear();
      return go_on;
    }
    for (;;) {
      size_t crlf = buffer.find("\r\n");
      if (crlf == std::string::npos) return true;
      size_t size = std::strtoul(buffer.c_str(), nullptr, 16);
      if (size == 0) return false;  // the last chunk
      if (buffer.size() < crlf + 2 + size + 2) return true;
      if (!on_body(std::string_view(buffer).substr(crlf + 2, size))) return false;
      buffer.erase(0, crlf + 2 + size + 2);
    }
  };
  for (;;) {
    ssize_t n = ::recv(fd, piece, sizeof piece, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buffer.append(piece, static_cast<size_t>(n));
    if (!head_done) {
      size_t end = buffer.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      if (end < 12 || buffer.compare(0, 5, "HTTP/") != 0) break;
      std::string head = buffer.substr(0, end);
      buffer.erase(0, end + 4);
      head_done = true;
      for (auto& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      chunked = head.find("transfer-encoding: chunked") != std::string::npos;
      if (!on_status(std::atoi(head.c_str() + 9))) return true;
    }
    if (!deliver()) return true;
  }
  if (!head_done) {
    error = "no HTTP answer";
    return false;
  }
  deliver();
  return true;
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
