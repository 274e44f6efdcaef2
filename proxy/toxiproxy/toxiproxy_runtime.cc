#include "proxy/toxiproxy/toxiproxy_runtime.h"

#include <map>
#include <mutex>
#include <utility>

#include <spdlog/spdlog.h>

#include "config/host_port.h"
#include "proxy/net/bound_socket.h"
#include "proxy/toxiproxy/toxiproxy_routes.h"
#include "proxy/util/bound_report.h"

namespace kproxy::toxiproxy {

ProxyHost reserving_host() {
  struct Reservations {
    std::mutex mutex;
    std::map<std::string, proxy::OwnedDescriptor> sockets;  ///< by proxy name
  };
  auto held = std::make_shared<Reservations>();
  ProxyHost host;
  host.open = [held](const std::string& name, const std::string& listen, const std::string&, std::string& bound, ApiError& error) {
    std::string why;
    auto address = config::parse_host_port(listen, &why, /*allow_port_zero=*/true);
    if (!address) {
      error = {400, "listen: " + why};
      return false;
    }
    if (address->host == "localhost") address->host = "127.0.0.1";
    proxy::BoundSocket socket = proxy::bind_tcp_socket(address->host, address->port);
    if (!socket.socket) {
      const bool taken = socket.error.find("in use") != std::string::npos;
      error = {taken ? 409 : 400, "listen: " + socket.error};
      return false;
    }
    bound = config::HostPort{address->host, socket.port}.to_string();
    std::lock_guard lock(held->mutex);
    held->sockets[name] = std::move(socket.socket);
    return true;
  };
  host.close = [held](const std::string& name) {
    std::lock_guard lock(held->mutex);
    held->sockets.erase(name);
  };
  return host;
}

ToxiproxyRuntime::ToxiproxyRuntime(config::ToxiproxyConfig config, std::string version, ProxyHost host)
    : config_(std::move(config)), version_(std::move(version)), table_(std::make_unique<ProxyTable>(std::move(host), config_.max_proxies)) {
}

ToxiproxyRuntime::~ToxiproxyRuntime() { stop(); }

std::string ToxiproxyRuntime::start() {
  if (!config_.listen) return "";
  admin::AdminServerOptions options;
  options.listen = config_.listen->to_string();
  options.probe_paths = {"/version"};  // what Testcontainers' ToxiproxyContainer waits for
  server_ = std::make_unique<admin::AdminServer>(options);
  register_toxiproxy_routes(*server_, *table_, version_);
  if (std::string error = server_->start(); !error.empty()) {
    server_.reset();
    return error;
  }
  const std::string address = config::HostPort{config_.listen->host, server_->port()}.to_string();
  proxy::report_bound("toxiproxy", "api", address);
  spdlog::info("Toxiproxy API on {} (at most {} proxies)", address, config_.max_proxies);
  return "";
}

void ToxiproxyRuntime::stop() {
  if (server_) server_->stop();
  table_.reset();  // closes every proxy (no route runs any more)
}

}  // namespace kproxy::toxiproxy
