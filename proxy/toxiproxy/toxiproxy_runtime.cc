#include "proxy/toxiproxy/toxiproxy_runtime.h"

#include <chrono>
#include <utility>

#include <spdlog/spdlog.h>

#include "config/host_port.h"
#include "proxy/admin/health.h"
#include "proxy/toxiproxy/toxiproxy_routes.h"
#include "proxy/util/bound_report.h"

namespace kproxy::toxiproxy {

namespace {

/// How long creating a proxy waits for its upstream's ApiVersions answer.
constexpr std::chrono::milliseconds kProbeTimeout{1000};

ProxyHost relay_host(ToxicRelay& relay) {
  ProxyHost host = relay.host();
  host.probe_kafka = [](const std::string& upstream) { return admin::probe_kafka(upstream, kProbeTimeout); };
  return host;
}

}  // namespace

ToxiproxyRuntime::ToxiproxyRuntime(config::ToxiproxyConfig config, std::string version)
    : config_(std::move(config)), version_(std::move(version)),
      table_(std::make_unique<ProxyTable>(relay_host(relay_), config_.max_proxies)) {}

ToxiproxyRuntime::~ToxiproxyRuntime() { stop(); }

std::string ToxiproxyRuntime::start() {
  if (!config_.listen) return "";
  if (std::string error = relay_.start(); !error.empty()) return error;
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
  relay_.stop();
}

}  // namespace kproxy::toxiproxy
