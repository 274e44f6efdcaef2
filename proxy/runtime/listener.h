// Listener: one listening socket on one worker's loop.
//
// Each listening address is bound once, by the first worker that opens it (without
// SO_REUSEPORT: a second process that tries the same address fails with "address in use", where a
// reuseport group would have let it take a share of the connections); the other workers listen
// on duplicates of that descriptor (open_shared), so whichever loop the kernel wakes accepts the
// next connection; the ConnectionBalancer then decides which worker serves it
// (proxy/runtime/connection_balancer.h). A listener is either a listener's bootstrap port or the port of
// one broker (port-per-broker).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>

#include <uv.h>

#include "proxy/connection/listener_spec.h"
#include "proxy/net/uv_handle.h"

namespace kproxy::runtime {

class Worker;

class Listener {
 public:
  Listener(Worker& worker, connection::ListenerSpec spec);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  /// Binds a new socket to the spec's address and listens. Returns "" or why it failed.
  std::string open();
  /// Listens on a duplicate of `bound_fd`, a socket another worker's Listener opened. Returns ""
  /// or why it failed.
  std::string open_shared(int bound_fd);
  /// The socket's descriptor (for open_shared on the other workers), -1 if not open.
  int fd() const;
  // Destroying the Listener closes its socket (UvHandle): no new connection is accepted from then on.

  const connection::ListenerSpec& spec() const { return *spec_; }
  /// The spec, shared with every connection this listener accepts (they may outlive it).
  const std::shared_ptr<const connection::ListenerSpec>& shared_spec() const { return spec_; }

 private:
  static void on_connection(uv_stream_t* server, int status);
  /// Starts listening and registers the address with the SelfConnectionDetector.
  std::string listen();

  Worker& worker_;
  std::shared_ptr<const connection::ListenerSpec> spec_;
  net::UvHandle<uv_tcp_t> handle_;
  sockaddr_storage bound_{};  ///< where it listens, registered with the SelfConnectionDetector once open
};

}  // namespace kproxy::runtime
