// ToxiproxyRuntime: the Toxiproxy API listener of a running kproxy (config `toxiproxy:`,
// docs/toxiproxy.md). It owns the ProxyTable and the AdminServer that serves the table's routes
// on `toxiproxy.listen`, apart from kproxy's own admin API (its port, no bearer token: Toxiproxy
// clients send none).
//
//   main ──► ToxiproxyRuntime::start() ──► AdminServer(toxiproxy.listen) ──► toxiproxy routes ──► ProxyTable ──► ProxyHost
//
// The ProxyHost is the data plane; reserving_host() below is the one the daemon uses for now.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/config.h"
#include "proxy/admin/admin_server.h"
#include "proxy/toxiproxy/proxy_table.h"

namespace kproxy::toxiproxy {

/// A ProxyHost that checks and holds each enabled proxy's listen address (bound, port 0 resolved,
/// a taken address refused with 409, a malformed one with 400) but does not accept or forward
/// connections yet: a client that connects is refused. "localhost" is read as 127.0.0.1.
ProxyHost reserving_host();

class ToxiproxyRuntime {
 public:
  ToxiproxyRuntime(config::ToxiproxyConfig config, std::string version, ProxyHost host);
  ~ToxiproxyRuntime();  ///< stops

  /// Starts the API listener when the config has toxiproxy.listen. "" or the error.
  std::string start();
  /// Stops the API listener, then closes every proxy. Idempotent.
  void stop();
  /// The port the API listens on (0: not started).
  uint16_t port() const { return server_ ? server_->port() : 0; }
  /// The proxies; valid until stop().
  ProxyTable& table() { return *table_; }

 private:
  config::ToxiproxyConfig config_;
  std::string version_;
  std::unique_ptr<ProxyTable> table_;
  std::unique_ptr<admin::AdminServer> server_;
};

}  // namespace kproxy::toxiproxy
