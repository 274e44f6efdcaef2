#include "tests/unit/support/tiny_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include <doctest/doctest.h>

namespace kproxy::testing {

TinyHttpServer::TinyHttpServer(int status, bool silent) : status_(status), silent_(silent) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd_ >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd_, 16) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { serve(); });
}

TinyHttpServer::~TinyHttpServer() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

std::vector<std::string> TinyHttpServer::requests() {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::vector<std::string> TinyHttpServer::bodies() {
  std::vector<std::string> out;
  for (const auto& r : requests()) {
    size_t head = r.find("\r\n\r\n");
    out.push_back(head == std::string::npos ? std::string() : r.substr(head + 4));
  }
  return out;
}

void TinyHttpServer::serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) continue;
    std::string in;
    char buf[8192];
    size_t want = std::string::npos;
    while (!stop_) {
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 20) <= 0) continue;
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
      size_t head = in.find("\r\n\r\n");
      if (head != std::string::npos && want == std::string::npos) {
        size_t cl = in.find("Content-Length: ");
        want = head + 4 + (cl == std::string::npos || cl > head ? 0 : std::stoul(in.substr(cl + 16)));
      }
      if (want != std::string::npos && in.size() >= want) break;
    }
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(in);
    }
    if (silent_) {
      while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } else {
      std::string body = "{}";
      std::string answer = "HTTP/1.1 " + std::to_string(status_) + (status_ / 100 == 2 ? " OK" : " Refused") +
                           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
      ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
    }
    ::close(c);
  }
}

}  // namespace kproxy::testing
