// ToxiproxyRuntime: the Toxiproxy API listener of a running kproxy (config `toxiproxy:`,
// docs/toxiproxy.md). It owns the ProxyTable and the AdminServer that serves the table's routes
// on `toxiproxy.listen`, apart from kproxy's own admin API (its port, no bearer token: Toxiproxy
// clients send none).
//
//   main ──► ToxiproxyRuntime::start() ──► AdminServer(toxiproxy.listen) ──► toxiproxy routes ──► ProxyTable ──► ProxyHost
//
// The data plane is a ToxicRelay (proxy/toxiproxy/toxic_relay.h): plain TCP, the toxics on raw bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/config.h"
#include "proxy/admin/admin_server.h"
#include "proxy/toxiproxy/proxy_table.h"
#include "proxy/toxiproxy/toxic_relay.h"

namespace kproxy::toxiproxy {

class ToxiproxyRuntime {
 public:
  ToxiproxyRuntime(config::ToxiproxyConfig config, std::string version);
  ~ToxiproxyRuntime();  ///< stops

  /// Starts the API listener when the config has toxiproxy.listen. "" or the error.
  std::string start();
  /// Stops the API listener, closes every proxy and stops the relay. Idempotent.
  void stop();
  /// The port the API listens on (0: not started).
  uint16_t port() const { return server_ ? server_->port() : 0; }
  /// The proxies; valid until stop().
  ProxyTable& table() { return *table_; }

 private:
  config::ToxiproxyConfig config_;
  std::string version_;
  ToxicRelay relay_;  ///< outlives the table, whose destructor closes the proxies on it
  std::unique_ptr<ProxyTable> table_;
  std::unique_ptr<admin::AdminServer> server_;
};

}  // namespace kproxy::toxiproxy
