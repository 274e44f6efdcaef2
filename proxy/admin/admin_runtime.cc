#include "proxy/admin/admin_runtime.h"

#include <cstdlib>
#include <string_view>

#include <spdlog/spdlog.h>

#include "proxy/admin/chaos_routes.h"
#include "proxy/admin/observability_routes.h"
#include "proxy/admin/openapi_document.h"
#include "proxy/cluster/broker_directory.h"
#include "proxy/observe/frame_metrics.h"
#include "proxy/pipeline/frame_observer.h"
#include "proxy/tap/tap_hub.h"

namespace kproxy::admin {
namespace {

/// Broker nodes refused a kproxy port, by reason (proxy/cluster/broker_directory.h BrokerPortRefusal), as
/// kproxy_proxy_broker_ports_refused_total{reason}.
void export_broker_port_refusals(std::vector<prometheus::MetricFamily>& out) {
  prometheus::MetricFamily f;
  f.name = "kproxy_proxy_broker_ports_refused_total";
  f.help =
      "Broker nodes refused a kproxy port, by reason: claimed_by_other (another listener's or the admin API's port), "
      "over_max_broker_ports, no_port_left.";
  f.type = prometheus::MetricType::Counter;
  for (size_t i = 0; i < static_cast<size_t>(proxy::BrokerPortRefusal::kCount); ++i) {
    auto reason = static_cast<proxy::BrokerPortRefusal>(i);
    prometheus::ClientMetric m;
    m.label.push_back({"reason", proxy::broker_port_refusal_name(reason)});
    m.counter.value = static_cast<double>(proxy::broker_ports_refused(reason));
    f.metric.push_back(std::move(m));
  }
  out.push_back(std::move(f));
}

/// Admin requests refused, by status (admin_server.h), as kproxy_admin_refusals_total{status}.
void export_admin_refusals(std::vector<prometheus::MetricFamily>& out) {
  prometheus::MetricFamily f;
  f.name = "kproxy_admin_refusals_total";
  f.help =
      "Admin API requests refused, by HTTP status (400 invalid, 401 token, 404, 405, 408 request too slow, 411 no Content-Length, "
      "413 body too large, 431 head too large, 503 busy).";
  f.type = prometheus::MetricType::Counter;
  for (int status : kRefusalStatuses) {
    prometheus::ClientMetric m;
    m.label.push_back({"status", std::to_string(status)});
    m.counter.value = static_cast<double>(admin_refusals(status));
    f.metric.push_back(std::move(m));
  }
  out.push_back(std::move(f));
}

}  // namespace

void register_admin_routes(AdminServer& server, ChaosAdmin& chaos, Health& health) {
  register_observability_routes(server, metrics::ProxyMetrics::instance(), tap::TapHub::instance(), health);
  register_chaos_routes(chaos, server);
  server.route("GET", "/openapi.json", [](const HttpRequest&) {
    return HttpResponse{200, "application/json", std::string(openapi_json())};
  });
}

AdminRuntime::AdminRuntime(proxy::Proxy& proxy, std::function<std::string()> reload) : proxy_(proxy) {
  auto config = proxy_.config();
  std::vector<std::string> names;
  for (const auto& l : config->listeners) names.push_back(l.name);
  metrics::ProxyMetrics::instance().set_listener_names(names);
  // metrics.frames (config), overridden by KPROXY_FRAME_METRICS=off|on|no-errors (no-errors: no
  // error codes counted; bench/metrics attributes the cost with these).
  bool frames = config->metrics.frames;
  bool count_errors = true;
  if (const char* knob = std::getenv("KPROXY_FRAME_METRICS"); knob && *knob) {
    std::string_view k(knob);
    frames = k != "off";
    count_errors = k != "no-errors";
  }
  tap::TapLimits tap_limits = tap::TapHub::instance().limits();
  tap_limits.records = config->tap.records;
  tap_limits.max_record_bytes = config->tap.max_record_bytes;
  tap_limits.max_records = config->tap.max_records;
  tap::TapHub::instance().set_limits(tap_limits);
  if (frames && (config->metrics.topic_labels || config->metrics.client_id_labels)) {
    metrics::ProxyMetrics::instance().enable_traffic_labels(config->metrics.topic_labels, config->metrics.client_id_labels,
                                                            config->metrics.max_label_values);
  }
  if (frames) {
    proxy::set_frame_observer(
        std::make_shared<metrics::FrameMetrics>(metrics::ProxyMetrics::instance(), tap::TapHub::instance(), names, count_errors));
  } else {
    proxy::set_frame_observer(nullptr);
  }
  metrics::ProxyMetrics::instance().add_collector(export_admin_refusals);
  metrics::ProxyMetrics::instance().add_collector(export_broker_port_refusals);
  chaos_admin_ =
      std::make_unique<ChaosAdmin>(proxy_.chaos(), std::move(reload), [this] { return proxy_.config()->limits.max_fault_rules; });
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
  } else if (const char* token = std::getenv("KPROXY_ADMIN_TOKEN"); token && *token) {
    options.bearer_token = token;  // the older way, kept working (deploy/k8s uses it)
    token_origin = "env KPROXY_ADMIN_TOKEN";
  }
  server_ = std::make_unique<AdminServer>(options);
  register_admin_routes(*server_, *chaos_admin_, *health_);
  std::string error = server_->start();
  if (!error.empty()) {
    server_.reset();
    return error;
  }
  spdlog::info("admin API on {} (port {}){}", options.listen, server_->port(),
               options.bearer_token.empty() ? ", no bearer token (set admin.token_file or admin.token_env)"
                                            : ", bearer token required (from " + token_origin + ")");
  return "";
}

void AdminRuntime::stop() {
  tap::TapHub::instance().close_all();
  if (server_) server_->stop();
}

}  // namespace kproxy::admin
