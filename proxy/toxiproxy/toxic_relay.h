// ToxicRelay: the plain-TCP data plane of the Toxiproxy API: a loop thread of its own that
// listens for each enabled proxy, connects every accepted client to the proxy's upstream and
// passes the bytes both ways through the proxy's toxics (docs/toxiproxy.md "Toxic types").
//
//   client ──► listener (per proxy) ──► Link ──► upstream
//                                        ├─ upstream direction:   client → upstream, its toxics
//                                        └─ downstream direction: upstream → client, its toxics
//
// Each direction queues what it read as pieces with a release time (latency and jitter, the
// bandwidth's pace, the slicer's pieces) and writes them out when due; a timeout toxic holds the
// data until it is removed (and closes the connection after its timeout, when not 0); reset_peer
// resets both sockets (RST) its timeout after the toxic applies; limit_data closes once its bytes
// have passed; slow_close delays passing a close on. Toxicity is drawn once per connection and
// toxic (Toxiproxy's semantics): a connection either has a toxic or not for its whole life.
// Toxics added, changed or removed apply to open connections at once.
//
// A proxy whose upstream was down when it was created (ProxyTable probes it again,
// docs/toxiproxy.md "Kafka or not") holds its connections: they are accepted but not connected
// upstream until the host's release() (or closed with the proxy, when it reopens as a kproxy
// listener); the first one calls the callback given to on_first_connection.
//
// Threads: host()'s functions are called from the API's threads; they hand their work to the
// loop and wait for it (a DELETE answers once the listener and its connections are closed, so
// the port is free again). The loop owns every handle (UvHandle); stop() closes them all and
// joins the thread, leaving the loop closed cleanly.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "proxy/toxiproxy/proxy_table.h"

namespace kproxy::toxiproxy {

class ToxicRelay {
 public:
  ToxicRelay();
  ~ToxicRelay();  ///< stops
  ToxicRelay(const ToxicRelay&) = delete;
  ToxicRelay& operator=(const ToxicRelay&) = delete;

  /// Starts the loop thread. "" or why not.
  std::string start();
  /// Closes every listener and connection and joins the loop thread. Idempotent.
  void stop();

  /// The ProxyHost that opens and closes this relay's listeners and sets their toxics. Its
  /// functions must not be called after stop() (they then refuse, or do nothing).
  ProxyHost host();

  /// Client connections open now, over every proxy.
  size_t connections() const { return connections_.load(); }

  struct Loop;  // the loop thread's state (toxic_relay.cc)

 private:
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  std::atomic<size_t> connections_{0};
};

}  // namespace kproxy::toxiproxy
