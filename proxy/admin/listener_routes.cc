#include "proxy/admin/listener_routes.h"

#include <utility>

namespace kproxy::admin {

namespace {

const char* scheme_name(config::BrokerPorts::Scheme scheme) {
  switch (scheme) {
    case config::BrokerPorts::Scheme::kNodeIdOffset: return "node_id_offset";
    case config::BrokerPorts::Scheme::kInOrder: return "in_order";
    case config::BrokerPorts::Scheme::kKernel: return "kernel";
    case config::BrokerPorts::Scheme::kSni: return "sni";
  }
  return "?";
}

}  // namespace

std::vector<ListenerSnapshot> listener_snapshots(proxy::Proxy& proxy) {
  auto config = proxy.config();
  std::vector<ListenerSnapshot> out;
  for (size_t i = 0; i < config->listeners.size(); ++i) {
    const auto& l = config->listeners[i];
    out.push_back(
        {l.name, l.listen.host, proxy.listener_port(i), l.advertise, scheme_name(l.broker_ports.scheme), proxy.directory(i).routes()});
  }
  return out;
}

nlohmann::json listeners_json(const std::vector<ListenerSnapshot>& listeners, const std::string& admin_address) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& l : listeners) {
    nlohmann::json brokers = nlohmann::json::array();
    for (const auto& b : l.brokers) {
      brokers.push_back({{"node_id", b.node_id},
                         {"address", config::HostPort{l.bind_host, b.proxy_port}.to_string()},
                         {"advertised", config::HostPort{l.advertise, b.proxy_port}.to_string()},
                         {"broker", b.real.to_string()},
                         {"listening", b.listening}});
    }
    list.push_back({{"name", l.name},
                    {"address", l.port ? nlohmann::json(config::HostPort{l.bind_host, l.port}.to_string()) : nlohmann::json()},
                    {"advertise", l.advertise},
                    {"broker_ports", l.broker_ports},
                    {"brokers", std::move(brokers)}});
  }
  return {{"listeners", std::move(list)}, {"admin", admin_address}};
}

void register_listener_routes(AdminServer& server, ListenerSource source) {
  server.route("GET", "/listeners", [source = std::move(source)](const HttpRequest&) {
    auto listeners = source.listeners ? source.listeners() : std::vector<ListenerSnapshot>{};
    auto admin = source.admin_address ? source.admin_address() : std::string();
    return HttpResponse{200, "application/json", listeners_json(listeners, admin).dump() + "\n"};
  });
}

}  // namespace kproxy::admin
