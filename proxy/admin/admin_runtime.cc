#include "proxy/admin/admin_runtime.h"

#include <cstdlib>
#include <string_view>

#include <spdlog/spdlog.h>

#include "proxy/admin/chaos_routes.h"
#include "proxy/admin/observability_routes.h"
#include "proxy/admin/openapi_document.h"
#include "proxy/admin/transaction_routes.h"
#include "proxy/observe/frame_metrics.h"
#include "proxy/observe/transaction_metrics.h"
#include "proxy/observe/transaction_traces.h"
#include "proxy/pipeline/frame_observer.h"
#include "proxy/tap/tap_hub.h"
#include "proxy/util/bound_report.h"

namespace kproxy::admin {

void register_admin_routes(AdminServer& server, ChaosAdmin& chaos, Health& health,
                           std::shared_ptr<observe::TransactionTracker> transactions, ListenerSource listeners) {
  register_observability_routes(server, metrics::ProxyMetrics::instance(), tap::TapHub::instance(), health);
  register_transaction_routes(server, std::move(transactions));
  register_listener_routes(server, std::move(listeners));
  register_chaos_routes(chaos, server);
  server.route("GET", "/openapi.json", [](const HttpRequest&) {
    return HttpResponse{200, "application/json", std::string(openapi_json())};
  });
}

AdminRuntime::AdminRuntime(proxy::Proxy& proxy, std::function<std::string()> reload) : proxy_(proxy) {
  auto config = proxy_.config();
  std::vector<std::string> names;
  for (const auto& l : config->listeners) names.push_back(l.name);
  // The last slot counts every listener added at run time (proxy/runtime/proxy.h add_listener):
  // per-listener metrics are sized when a thread first counts.
  names.push_back("runtime");
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
  // KPROXY_TRANSACTIONS=off: the frame metrics without the transaction tracker (bench/proxy
  // measures what the tracker costs with it).
  bool track_transactions = true;
  if (const char* knob = std::getenv("KPROXY_TRANSACTIONS"); knob && *knob) track_transactions = std::string_view(knob) != "off";
  if (frames) {
    auto observer = std::make_shared<metrics::FrameMetrics>(metrics::ProxyMetrics::instance(), tap::TapHub::instance(), names, count_errors,
                                                            track_transactions);
    // The metrics and the routes hold the tracker (and so the observer) alive while they read it.
    transactions_ = std::shared_ptr<observe::TransactionTracker>(observer, &observer->transactions());
    observe::export_transaction_metrics(metrics::ProxyMetrics::instance(), transactions_);
    if (config->tracing) traces_ = observe::start_transaction_tracing(transactions_, *config->tracing, metrics::ProxyMetrics::instance());
    proxy::set_frame_observer(std::move(observer));
  } else {
    transactions_ = std::make_shared<observe::TransactionTracker>();  // frames off: nothing is tracked
    proxy::set_frame_observer(nullptr);
    if (config->tracing)
      spdlog::warn(
          "tracing: no traces while per-frame metrics are off (metrics.frames: false or KPROXY_FRAME_METRICS=off): "
          "transactions are rebuilt from the frames");
  }
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
  } else if (const char* token = std::getenv("KPROXY_ADMIN_TOKEN"); token && *token) {
    options.bearer_token = token;  // the older way, kept working (deploy/k8s uses it)
    token_origin = "env KPROXY_ADMIN_TOKEN";
  }
  server_ = std::make_unique<AdminServer>(options);
  ListenerSource listeners{
      [this] { return listener_snapshots(proxy_); },
      [this, host = config->admin.listen->host] {
        return config::HostPort{host, server_ ? server_->port() : uint16_t{0}}.to_string();
      },
      [this](const std::string& name, const std::string& body) { return put_listener(proxy_, name, body); },
      [this](const std::string& name, std::chrono::milliseconds drain) { return delete_listener(proxy_, name, drain); }};
  register_admin_routes(*server_, *chaos_admin_, *health_, transactions_, std::move(listeners));
  std::string error = server_->start();
  if (!error.empty()) {
    server_.reset();
    return error;
  }
  const std::string address = config::HostPort{config->admin.listen->host, server_->port()}.to_string();
  proxy::report_bound("admin", "api", address);
  spdlog::info("admin API on {}{}", address,
               options.bearer_token.empty() ? ", no bearer token (set admin.token_file or admin.token_env)"
                                            : ", bearer token required (from " + token_origin + ")");
  return "";
}

void AdminRuntime::stop() {
  tap::TapHub::instance().close_all();
  if (server_) server_->stop();
  if (traces_) traces_->stop();  // sends what is queued, within tracing.timeout
}

}  // namespace kproxy::admin
