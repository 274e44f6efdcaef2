#include "proxy/admin/admin_runtime.h"

#include <string_view>

#include <spdlog/spdlog.h>

#include "proxy/admin/chaos_routes.h"
#include "proxy/admin/observability_routes.h"
#include "proxy/admin/openapi_document.h"
#include "proxy/admin/transaction_routes.h"
#include "proxy/tap/tap_hub.h"
#include "proxy/util/bound_report.h"

namespace kproxy::admin {

void register_admin_routes(AdminServer& server, ChaosAdmin& chaos, Health& health, metrics::ProxyMetrics& metrics, tap::TapHub& tap,
                           std::shared_ptr<observe::TransactionTracker> transactions, ListenerSource listeners) {
  register_observability_routes(server, metrics, tap, health);
  register_transaction_routes(server, std::move(transactions));
  register_listener_routes(server, std::move(listeners));
  register_chaos_routes(chaos, server);
  server.route("GET", "/openapi.json", [](const HttpRequest&) {
    return HttpResponse{200, "application/json", std::string(openapi_json())};
  });
}

AdminRuntime::AdminRuntime(runtime::Proxy& proxy, services::ProcessServices& services, std::function<std::string()> reload)
    : proxy_(proxy), services_(services) {
  chaos_admin_ =
      std::make_unique<ChaosAdmin>(proxy_.live_rules(), std::move(reload), [this] { return proxy_.config()->limits.max_fault_rules; });
  chaos_admin_->set_scenario_hooks({[this](std::shared_ptr<const chaos::Scenario> s) { return proxy_.set_scenario(std::move(s)); },
                                    [this] { return proxy_.scenario(); }});

  HealthHooks hooks;
  hooks.worker_count = [this] { return proxy_.worker_count(); };
  hooks.post = [this](size_t i, std::function<void()> task) { proxy_.worker(i).post(std::move(task)); };
  hooks.upstreams = [this] {
    std::vector<std::string> out;
    for (const auto& l : proxy_.config()->listeners) out.push_back(l.upstream.to_string());
    return out;
  };
  hooks.draining = [this] { return proxy_.worker_count() > 0 && proxy_.worker(0).draining(); };
  hooks.started = [this] { return proxy_.started(); };
  health_ = std::make_unique<Health>(std::move(hooks));
}

AdminRuntime::~AdminRuntime() { stop(); }

std::string AdminRuntime::start() {
  auto config = proxy_.config();
  if (!config->admin.listen) return "";
  AdminServerOptions options;
  options.listen = config->admin.listen->to_string();
  std::string token_origin;
  if (config->admin.token) {
    options.bearer_token = *config->admin.token;
    token_origin = config->admin.token_origin;
  }
  server_ = std::make_unique<AdminServer>(options);
  ListenerSource listeners{
      [this] { return listener_snapshots(proxy_); },
      [this, host = config->admin.listen->host] {
        return config::HostPort{host, server_ ? server_->port() : uint16_t{0}}.to_string();
      },
      [this](const std::string& name, const std::string& body) { return put_listener(proxy_, name, body); },
      [this](const std::string& name, std::chrono::milliseconds drain) { return delete_listener(proxy_, name, drain); }};
  register_admin_routes(*server_, *chaos_admin_, *health_, services_.metrics(), services_.tap(), services_.transactions(),
                        std::move(listeners));
  std::string error = server_->start();
  if (!error.empty()) {
    server_.reset();
    return error;
  }
  services_.metrics().export_counter(server_->refusal_counter());
  const std::string address = config::HostPort{config->admin.listen->host, server_->port()}.to_string();
  util::report_bound("admin", "api", address);
  spdlog::info("admin API on {}{}", address,
               options.bearer_token.empty() ? ", no bearer token (set admin.token_file or admin.token_env)"
                                            : ", bearer token required (from " + token_origin + ")");
  return "";
}

void AdminRuntime::stop() {
  services_.tap().close_all();  // ends the /tap streams, so that the server's threads end
  if (server_) server_->stop();
}

}  // namespace kproxy::admin
