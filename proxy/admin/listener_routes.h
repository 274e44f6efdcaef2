// GET /listeners: every address kproxy listens on, as bound (issue #30 item 7). A config may
// give port 0 for a listener, for `broker_ports` or for the admin API; the kernel then picks a
// free port, and a test harness or a script learns it here (or from the "kproxy bound" lines
// on standard output, proxy/util/bound_report.h) instead of probing for free ports.
//
//   {"listeners": [{"name": "kafka", "address": "127.0.0.1:41234", "advertise": "127.0.0.1",
//                   "broker_ports": "kernel",
//                   "brokers": [{"node_id": 1, "address": "127.0.0.1:41235",
//                                "advertised": "127.0.0.1:41235", "broker": "10.0.0.7:9092",
//                                "listening": true}]}],
//    "admin": "127.0.0.1:41236"}
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <map>

#include "proxy/admin/admin_server.h"
#include "proxy/cluster/broker_directory.h"
#include "proxy/runtime/proxy.h"

namespace kproxy::admin {

/// One listener as GET /listeners shows it.
struct ListenerSnapshot {
  std::string name;
  std::string bind_host;     ///< the listen host
  uint16_t port = 0;         ///< bound port (0: not bound yet)
  std::string advertise;     ///< host handed to clients for brokers
  std::string broker_ports;  ///< "node_id_offset", "in_order" or "kernel"
  std::vector<cluster::BrokerRoute> brokers;
  bool runtime = false;  ///< added at run time (PUT /listeners/{name}), not from the config file
  std::map<int32_t, config::HostPort> advertise_nodes =
      {};  ///< nodes handed to clients at their own host:port (`advertise: "N=host:port"`)
};

/// The listeners of `proxy` now. Safe from the admin threads.
std::vector<ListenerSnapshot> listener_snapshots(runtime::Proxy& proxy);

/// The body of GET /listeners.
nlohmann::json listeners_json(const std::vector<ListenerSnapshot>& listeners, const std::string& admin_address);

/// Where GET /listeners reads from (empty functions: no listeners, no admin address).
struct ListenerSource {
  std::function<std::vector<ListenerSnapshot>()> listeners;
  std::function<std::string()> admin_address;  ///< where the admin API itself is bound
  /// PUT /listeners/{name} (name, body) and DELETE /listeners/{name} (name, drain): empty, PUT
  /// answers 503 and DELETE 404.
  std::function<HttpResponse(const std::string&, const std::string&)> put;
  std::function<HttpResponse(const std::string&, std::chrono::milliseconds)> remove;
};

/// PUT /listeners/{name} on `proxy`: the body (JSON or YAML, like one `listeners:` entry) is
/// checked by config::load_listener_entry (the config loader's checks and texts), then the
/// listener opens (proxy/runtime/proxy.h add_listener). 201 with the listener as GET /listeners
/// shows it and `warnings`; 400 (a refused entry: every error, one per line), 409 (name or
/// address taken, too many).
HttpResponse put_listener(runtime::Proxy& proxy, const std::string& name, const std::string& body);
/// DELETE /listeners/{name}: 204, or 404 (no run-time listener of that name; a listener of the
/// config file is not removed: 409).
HttpResponse delete_listener(runtime::Proxy& proxy, const std::string& name, std::chrono::milliseconds drain);

/// Registers GET /listeners, PUT and DELETE /listeners/{name}.
void register_listener_routes(AdminServer& server, ListenerSource source);

}  // namespace kproxy::admin
