#include "proxy/admin/listener_routes.h"

#include <cctype>
#include <utility>

#include "config/config_loader.h"

namespace kproxy::admin {

namespace {

const char* scheme_name(config::BrokerPorts::Scheme scheme) {
  switch (scheme) {
    case config::BrokerPorts::Scheme::kNodeIdOffset: return "node_id_offset";
    case config::BrokerPorts::Scheme::kInOrder: return "in_order";
    case config::BrokerPorts::Scheme::kKernel: return "kernel";
    case config::BrokerPorts::Scheme::kSni: return "sni";
    case config::BrokerPorts::Scheme::kListenPort: return "listen";
  }
  return "?";
}

}  // namespace

std::vector<ListenerSnapshot> listener_snapshots(runtime::Proxy& proxy) {
  auto config = proxy.config();
  std::vector<ListenerSnapshot> out;
  for (size_t i = 0; i < config->listeners.size(); ++i) {
    const auto& l = config->listeners[i];
    out.push_back(
        {l.name, l.listen.host, proxy.listener_port(i), l.advertise, scheme_name(l.broker_ports.scheme), proxy.directory(i).routes()});
    out.back().advertise_nodes = l.advertise_nodes;
  }
  for (const auto& [i, l] : proxy.runtime_listeners()) {
    out.push_back({l->name, l->listen.host, proxy.listener_port(i), l->advertise, scheme_name(l->broker_ports.scheme),
                   proxy.directory(i).routes(), true});
    out.back().advertise_nodes = l->advertise_nodes;
  }
  return out;
}

HttpResponse put_listener(runtime::Proxy& proxy, const std::string& name, const std::string& body) {
  // The names of fault rules' (docs/admin-api.openapi.yaml RuleName): they go into paths and logs.
  bool valid = !name.empty() && name.size() <= 128 && name != "." && name != "..";
  for (char c : name) valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  if (!valid) return json_error(400, "the listener name must be 1-128 of A-Z a-z 0-9 - _ . (not . or ..)");
  std::vector<config::ListenerConfig> added;
  for (const auto& [i, l] : proxy.runtime_listeners()) added.push_back(*l);
  // A name taken is a conflict, as an address taken is (409).
  for (const auto& l : proxy.config()->listeners) {
    if (l.name == name) return json_error(409, "listener '" + name + "' is in the config file");
  }
  for (const auto& l : added) {
    if (l.name == name) return json_error(409, "listener '" + name + "' exists: DELETE it first");
  }
  auto entry = config::load_listener_entry(body, name, *proxy.config(), added, "PUT /listeners/" + name);
  // A port another listener or API claims is a conflict (409), as an address taken is; a body of
  // the right form that asks for what cannot be (a wildcard address without advertise, a name
  // that differs from the path's) is 422, as a fault rule that cannot apply is; a body that is not
  // a listener entry at all is 400 (docs/admin-api.openapi.yaml).
  if (!entry.listener) return json_error(entry.port_conflict ? 409 : entry.well_formed ? 422 : 400, entry.error_text());
  auto result = proxy.add_listener(*entry.listener);
  if (!result.error.empty()) return json_error(result.status ? result.status : 409, result.error);
  ListenerSnapshot snapshot;
  for (auto& s : listener_snapshots(proxy)) {
    if (s.name == name) snapshot = std::move(s);
  }
  nlohmann::json out = listeners_json({snapshot}, "")["listeners"][0];
  nlohmann::json warnings = nlohmann::json::array();
  for (const auto& w : entry.warnings) warnings.push_back(w.to_string());
  out["warnings"] = std::move(warnings);
  return HttpResponse{201, "application/json", out.dump() + "\n"};
}

HttpResponse delete_listener(runtime::Proxy& proxy, const std::string& name, std::chrono::milliseconds drain) {
  if (proxy.remove_listener(name, drain)) return HttpResponse{204, "application/json", ""};
  for (const auto& l : proxy.config()->listeners) {
    if (l.name == name) return json_error(409, "listener '" + name + "' is in the config file: remove it there and restart");
  }
  return json_error(404, "no listener '" + name + "' was added at run time");
}

nlohmann::json listeners_json(const std::vector<ListenerSnapshot>& listeners, const std::string& admin_address) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& l : listeners) {
    nlohmann::json brokers = nlohmann::json::array();
    for (const auto& b : l.brokers) {
      brokers.push_back({{"node_id", b.node_id},
                         {"address", config::HostPort{l.bind_host, b.proxy_port}.to_string()},
                         {"advertised", l.advertise_nodes.count(b.node_id) ? l.advertise_nodes.at(b.node_id).to_string()
                                                                           : config::HostPort{l.advertise, b.proxy_port}.to_string()},
                         {"broker", b.real.to_string()},
                         {"listening", b.listening}});
    }
    list.push_back({{"name", l.name},
                    {"address", l.port ? nlohmann::json(config::HostPort{l.bind_host, l.port}.to_string()) : nlohmann::json()},
                    {"advertise", l.advertise},
                    {"broker_ports", l.broker_ports},
                    {"runtime", l.runtime},
                    {"brokers", std::move(brokers)}});
  }
  return {{"listeners", std::move(list)}, {"admin", admin_address}};
}

void register_listener_routes(AdminServer& server, ListenerSource source) {
  server.route("PUT", "/listeners/{name}", [put = source.put](const HttpRequest& r) {
    if (!put) return json_error(503, "listeners cannot be added here");
    return put(r.path_params.at("name"), r.body);
  });
  server.route("DELETE", "/listeners/{name}", [remove = source.remove](const HttpRequest& r) {
    // ?drain=2s: how long its connections may finish what is in flight (default 5 s, 0: close at once).
    std::chrono::milliseconds drain{5000};
    if (auto it = r.query_params.find("drain"); it != r.query_params.end()) {
      auto d = config::parse_duration(it->second);
      if (!d || *d > std::chrono::hours(3)) return json_error(400, "drain: '" + it->second + "' is not a duration up to 3h (30s, 500ms)");
      drain = *d;
    }
    if (!remove) return json_error(404, "no listener '" + r.path_params.at("name") + "' was added at run time");
    return remove(r.path_params.at("name"), drain);
  });
  server.route("GET", "/listeners", [source = std::move(source)](const HttpRequest&) {
    auto listeners = source.listeners ? source.listeners() : std::vector<ListenerSnapshot>{};
    auto admin = source.admin_address ? source.admin_address() : std::string();
    return HttpResponse{200, "application/json", listeners_json(listeners, admin).dump() + "\n"};
  });
}

}  // namespace kproxy::admin
