// ToxiproxyRuntime: the Toxiproxy API listener of a running kproxy (config `toxiproxy:`,
// docs/toxiproxy.md). It owns the ProxyTable and the AdminServer that serves the table's routes
// on `toxiproxy.listen`, apart from kproxy's own admin API (its port, no bearer token: Toxiproxy
// clients send none).
//
//   main ──► ToxiproxyRuntime::start() ──► AdminServer(toxiproxy.listen) ──► toxiproxy routes ──► ProxyTable ──► ProxyHost
//
// Two data planes: a proxy whose upstream is not Kafka is a ToxicRelay (proxy/toxiproxy/toxic_relay.h):
// plain TCP, the toxics on raw bytes. A Kafka-aware one (with a Proxy given) is a kproxy listener
// added at run time (Proxy::add_listener, named "toxiproxy-<proxy>"), and its toxics are fault
// rules scoped to that listener ("toxiproxy.<proxy>.<toxic>", proxy_toxic_rule): the client is
// given the proxy's address for its broker(s), so no connection goes to the broker directly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <map>
#include <mutex>
#include <set>
#include <vector>
#include "config/config.h"

#include "proxy/admin/admin_server.h"
#include "proxy/runtime/proxy.h"
#include "proxy/toxiproxy/proxy_table.h"
#include "proxy/toxiproxy/toxic_relay.h"

namespace kproxy::toxiproxy {

class ToxiproxyRuntime {
 public:
  /// `kafka`: where Kafka-aware proxies become listeners (null: every proxy is plain TCP).
  ToxiproxyRuntime(config::ToxiproxyConfig config, std::string version, runtime::Proxy* kafka = nullptr);
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
  /// The host the table uses: the relay's, with Kafka-aware proxies sent to `kafka_`.
  ProxyHost make_host();
  bool open_kafka(const std::string& name, const KafkaOptions& options, const std::string& listen, const std::string& upstream,
                  std::string& bound, ApiError& error);
  void set_kafka_toxics(const std::string& name, const std::vector<ToxicSpec>& toxics);

  config::ToxiproxyConfig config_;
  std::string version_;
  runtime::Proxy* kafka_ = nullptr;
  std::mutex kafka_mutex_;
  std::set<std::string> kafka_proxies_;                    ///< proxies open as kproxy listeners (under kafka_mutex_)
  std::map<std::string, std::vector<std::string>> rules_;  ///< per proxy, the fault rules of its toxics (under kafka_mutex_)
  ToxicRelay relay_;                                       ///< outlives the table, whose destructor closes the proxies on it
  std::unique_ptr<ProxyTable> table_;
  std::unique_ptr<admin::AdminServer> server_;
};

}  // namespace kproxy::toxiproxy
