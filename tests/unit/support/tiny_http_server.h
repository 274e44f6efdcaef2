// A tiny HTTP/1.1 server on 127.0.0.1 for unit tests of kproxy's HTTP clients (the trace
// exporter): the port comes from the kernel (nothing names it before it listens), one thread
// serves one connection at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kproxy::testing {

class TinyHttpServer {
 public:
  /// Reads each request whole (headers and a Content-Length body), keeps it and answers
  /// `status` with a small JSON body; with `silent`, reads and never answers (a collector that
  /// hangs) until destroyed.
  explicit TinyHttpServer(int status = 200, bool silent = false);
  ~TinyHttpServer();
  TinyHttpServer(const TinyHttpServer&) = delete;
  TinyHttpServer& operator=(const TinyHttpServer&) = delete;

  uint16_t port() const { return port_; }
  /// Every request received so far, raw.
  std::vector<std::string> requests();
  /// The bodies of those requests.
  std::vector<std::string> bodies();

 private:
  void serve();

  int fd_ = -1;
  uint16_t port_ = 0;
  int status_;
  bool silent_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

}  // namespace kproxy::testing
