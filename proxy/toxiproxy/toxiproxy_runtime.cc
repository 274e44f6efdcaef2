#include "proxy/toxiproxy/toxiproxy_runtime.h"

#include <cctype>
#include <chrono>
#include <cstdint>
#include <utility>

#include <spdlog/spdlog.h>

#include "config/config_loader.h"
#include "config/host_port.h"
#include "proxy/admin/health.h"
#include "proxy/toxiproxy/toxiproxy_routes.h"
#include "proxy/util/bound_report.h"

namespace kproxy::toxiproxy {

namespace {

/// How long creating a proxy waits for its upstream's ApiVersions answer.
constexpr std::chrono::milliseconds kProbeTimeout{1000};

/// The kproxy listener name of Toxiproxy proxy `name`.
std::string listener_name(const std::string& name) { return "toxiproxy-" + name; }

/// `text` as a glob that matches only itself (docs/faults.md "Match": `\` escapes).
std::string literal_glob(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

/// The fault rule name of toxic `toxic` of proxy `proxy`: "toxiproxy.<proxy>.<toxic>", each
/// character a rule name may not hold (docs/faults.md: A-Z a-z 0-9 - _ .) as '_', at most 128
/// characters (a longer one ends in a hash of the whole, FNV-1a).
std::string rule_name(const std::string& proxy, const std::string& toxic) {
  std::string full = "toxiproxy." + proxy + "." + toxic;
  std::string out;
  for (char c : full) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  if (out.size() > 128) {
    uint32_t h = 2166136261u;
    for (unsigned char c : full) h = (h ^ c) * 16777619u;
    out = out.substr(0, 119) + "." + std::to_string(h % 100000000u);
  }
  return out;
}

}  // namespace

ToxiproxyRuntime::ToxiproxyRuntime(config::ToxiproxyConfig config, std::string version, runtime::Proxy* kafka)
    : config_(std::move(config)), version_(std::move(version)), kafka_(kafka),
      table_(std::make_unique<ProxyTable>(make_host(), config_.max_proxies)) {}

ProxyHost ToxiproxyRuntime::make_host() {
  ProxyHost host = relay_.host();
  host.probe_kafka = [](const std::string& upstream) { return admin::probe_kafka(upstream, kProbeTimeout); };
  if (!kafka_) return host;
  host.open_kafka = [this](const std::string& name, const KafkaOptions& options, const std::string& listen, const std::string& upstream,
                           std::string& bound, ApiError& error) { return open_kafka(name, options, listen, upstream, bound, error); };
  auto close_tcp = host.close;
  host.close = [this, close_tcp](const std::string& name) {
    {
      std::lock_guard lock(kafka_mutex_);
      if (!kafka_proxies_.erase(name)) {
        if (close_tcp) close_tcp(name);
        return;
      }
    }
    set_kafka_toxics(name, {});
    // Toxiproxy closes a deleted or disabled proxy's connections at once.
    kafka_->remove_listener(listener_name(name), std::chrono::milliseconds(0));
  };
  auto toxics_tcp = host.toxics;
  host.toxics = [this, toxics_tcp](const std::string& name, const std::vector<ToxicSpec>& toxics) {
    bool kafka = false;
    {
      std::lock_guard lock(kafka_mutex_);
      kafka = kafka_proxies_.count(name) != 0;
    }
    if (kafka) set_kafka_toxics(name, toxics);
    else if (toxics_tcp) toxics_tcp(name, toxics);
  };
  return host;
}

bool ToxiproxyRuntime::open_kafka(const std::string& name, const KafkaOptions& options, const std::string& listen,
                                  const std::string& upstream, std::string& bound, ApiError& error) {
  // The proxy as a `listeners:` entry, checked by the config loader's code (the same as PUT
  // /listeners/{name}): a single broker at the proxy's own port unless broker_ports is given.
  // `advertise` is the listener's (a host and/or "N=host:port" per node, config/host_port.h).
  std::string host_port = listen;
  if (host_port.rfind("localhost:", 0) == 0) host_port = "127.0.0.1:" + host_port.substr(10);
  nlohmann::json entry = {{"listen", host_port}, {"upstream", upstream}};
  if (!options.advertise.empty()) entry["advertise"] = options.advertise;
  if (options.broker_ports.empty()) {
    entry["broker_ports"] = "listen";
  } else if (options.broker_ports.find('-') != std::string::npos) {
    entry["broker_port_range"] = options.broker_ports;
  } else {
    entry["broker_ports"] = options.broker_ports;
  }
  std::vector<config::ListenerConfig> added;
  for (const auto& [i, l] : kafka_->runtime_listeners()) added.push_back(*l);
  auto checked = config::load_listener_entry(entry.dump(), listener_name(name), *kafka_->config(), added, "proxy " + name);
  if (!checked.listener) {
    // A port another listener or API of kproxy claims is a conflict, as an address in use is.
    error = {checked.port_conflict ? 409 : 400, checked.error_text()};
    return false;
  }
  auto result = kafka_->add_listener(*checked.listener);
  if (!result.error.empty()) {
    error = {result.status == 400 ? 400 : 409, result.error};
    return false;
  }
  bound = config::HostPort{checked.listener->listen.host, result.port}.to_string();
  std::lock_guard lock(kafka_mutex_);
  kafka_proxies_.insert(name);
  return true;
}

void ToxiproxyRuntime::set_kafka_toxics(const std::string& name, const std::vector<ToxicSpec>& toxics) {
  std::lock_guard lock(kafka_mutex_);
  auto& live = kafka_->live_rules();
  auto& installed = rules_[name];
  for (const auto& r : installed) live.delete_rule(r);
  installed.clear();
  const std::string glob = literal_glob(listener_name(name));
  for (const auto& t : toxics) {
    const std::string rule = rule_name(name, t.name);
    nlohmann::json spec = proxy_toxic_rule(t, rule, glob);
    if (spec.is_null()) continue;
    if (std::string why = live.put_rule(rule, spec); !why.empty()) {
      spdlog::warn("toxiproxy proxy={} toxic={}: its fault rule was refused: {}", name, t.name, why);
      continue;
    }
    installed.push_back(rule);
  }
  if (installed.empty()) rules_.erase(name);
}

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
  util::report_bound("toxiproxy", "api", address);
  spdlog::info("Toxiproxy API on {} (at most {} proxies)", address, config_.max_proxies);
  return "";
}

void ToxiproxyRuntime::stop() {
  if (server_) server_->stop();
  table_.reset();  // closes every proxy (no route runs any more)
  relay_.stop();
}

}  // namespace kproxy::toxiproxy
