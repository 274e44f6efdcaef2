#include "proxy/admin/admin_runtime.h"

#include <cstdlib>
#include <string_view>

#include <spdlog/spdlog.h>

#include "proxy/admin/observability_routes.h"
#include "proxy/chaos/admin_registration.h"
#include "proxy/metrics/frame_metrics.h"
#include "proxy/pipeline.h"
#include "proxy/tap/tap_hub.h"

namespace kproxy::admin {

AdminRuntime::AdminRuntime(proxy::Proxy& proxy, std::function<std::string()> reload) : proxy_(proxy) {
  auto config = proxy_.config();
  std::vector<std::string> names;
  for (const auto& l : config->listeners) names.push_back(l.name);
  metrics::ProxyMetrics::instance().set_listener_names(names);
  // KPROXY_FRAME_METRICS=off: no per-frame metrics or tap (bench/metrics measures their cost).
  const char* knob = std::getenv("KPROXY_FRAME_METRICS");
  if (!knob || std::string_view(knob) != "off") {
    proxy::set_frame_observer(std::make_shared<metrics::FrameMetrics>(metrics::ProxyMetrics::instance(), tap::TapHub::instance(), names));
  }
  chaos_admin_ = std::make_unique<chaos::ChaosAdmin>(proxy_.chaos(), std::move(reload));

  HealthHooks hooks;
  hooks.worker_count = [this] { return proxy_.worker_count(); };
  hooks.post = [this](size_t i, std::function<void()> task) { proxy_.worker(i).post(std::move(task)); };
  hooks.upstreams = [this] {
    std::vector<std::string> out;
    for (const auto& l : proxy_.config()->listeners) out.push_back(l.upstream.to_string());
    return out;
  };
  hooks.draining = [this] { return proxy_.worker_count() > 0 && proxy_.worker(0).draining(); };
  health_ = std::make_unique<Health>(std::move(hooks));
}

AdminRuntime::~AdminRuntime() { stop(); }

std::string AdminRuntime::start() {
  auto config = proxy_.config();
  if (!config->admin.listen) return "";
  AdminServerOptions options;
  options.listen = config->admin.listen->to_string();
  if (const char* token = std::getenv("KPROXY_ADMIN_TOKEN"); token && *token) options.bearer_token = token;
  server_ = std::make_unique<AdminServer>(options);
  register_observability_routes(*server_, metrics::ProxyMetrics::instance(), tap::TapHub::instance(), *health_);
  chaos::register_chaos_routes(*chaos_admin_, *server_);
  std::string error = server_->start();
  if (!error.empty()) {
    server_.reset();
    return error;
  }
  spdlog::info("admin API on {} (port {}){}", options.listen, server_->port(), options.bearer_token.empty() ? "" : ", bearer token required");
  return "";
}

void AdminRuntime::stop() {
  tap::TapHub::instance().close_all();
  if (server_) server_->stop();
}

}  // namespace kproxy::admin
