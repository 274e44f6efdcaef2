// Listener: one listening socket on one worker's loop.
//
// Every worker binds its own socket to each listening address with SO_REUSEPORT, so the kernel
// spreads new connections over the workers and a connection stays on the loop that accepted it.
// A listener is either a listener's bootstrap port or the port of one broker (port-per-broker).
#pragma once

#include <cstdint>
#include <string>

#include <uv.h>

namespace kproxy::proxy {

class Worker;

/// What a listening socket stands for.
struct ListenerSpec {
  size_t listener_index = 0;  ///< into Config::listeners
  std::string name;           ///< the listener's name from the config
  std::string host;           ///< address to bind
  uint16_t port = 0;
  int32_t node_id = -1;       ///< -1: the bootstrap port; else the broker this port stands for

  bool is_broker_port() const { return node_id >= 0; }
  /// "kafka" or "kafka/node-3", for logs.
  std::string label() const { return is_broker_port() ? name + "/node-" + std::to_string(node_id) : name; }
};

class Listener {
 public:
  Listener(Worker& worker, ListenerSpec spec);
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  /// Binds (SO_REUSEPORT) and listens. Returns "" or why it failed (then call close()).
  std::string open();
  /// Closes the socket; the object deletes itself when libuv is done with it.
  void close();

  const ListenerSpec& spec() const { return spec_; }

 private:
  static void on_connection(uv_stream_t* server, int status);
  static void on_close(uv_handle_t* h);

  Worker& worker_;
  ListenerSpec spec_;
  uv_tcp_t handle_;
};

}  // namespace kproxy::proxy
