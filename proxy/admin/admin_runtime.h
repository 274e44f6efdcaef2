// AdminRuntime: everything the running daemon serves on its admin listener, wired together.
//
//   main ──► AdminRuntime(proxy) ──► FrameMetrics installed as the pipeline's FrameObserver
//                                ──► AdminServer: /metrics /healthz /readyz /tap /log-level
//                                                 + chaos routes (/faults..., /api-versions, /reload)
//                                                 + /openapi.json (docs/admin-api.openapi.yaml)
//
// Create it before Proxy::start() (connections must see the observer), start() it after.
// The bearer token comes from the config (admin.token_file or admin.token_env, resolved by the
// loader), else from the environment variable KPROXY_ADMIN_TOKEN, else there is none.
// metrics.frames: false (or KPROXY_FRAME_METRICS=off, which overrides the config both ways) leaves
// the observer out: per-frame metrics and tap off. A `tracing:` section starts the exporter of the
// transactions' traces (it needs the observer); stop() flushes it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "proxy/admin/admin_server.h"
#include "proxy/admin/health.h"
#include "proxy/admin/listener_routes.h"
#include "proxy/observe/trace_exporter.h"
#include "proxy/observe/transaction_tracker.h"
#include "proxy/runtime/proxy.h"

namespace kproxy::admin {

class ChaosAdmin;

/// Registers every route kproxy's admin listener serves: the observability ones, the
/// transactions (from `transactions`), GET /listeners (from `listeners`), the chaos ones and GET
/// /openapi.json. AdminRuntime::start
/// calls it; so does the test that checks the routes against docs/admin-api.openapi.yaml
/// (tests/unit/proxy/admin/openapi_test.cc).
void register_admin_routes(AdminServer& server, ChaosAdmin& chaos, Health& health,
                           std::shared_ptr<observe::TransactionTracker> transactions, ListenerSource listeners = {});

class AdminRuntime {
 public:
  /// `reload` re-reads the config file and applies it; returns "" or the errors.
  AdminRuntime(proxy::Proxy& proxy, std::function<std::string()> reload);
  ~AdminRuntime();

  /// Starts the admin listener if the config has admin.listen. Returns "" or the error.
  std::string start();
  void stop();
  uint16_t port() const { return server_ ? server_->port() : 0; }

 private:
  proxy::Proxy& proxy_;
  std::unique_ptr<ChaosAdmin> chaos_admin_;
  std::unique_ptr<Health> health_;
  /// The frame observer's transaction tracker (an empty one when frame metrics are off).
  std::shared_ptr<observe::TransactionTracker> transactions_;
  /// tracing: the exporter of the transactions' traces (null without a `tracing:` section).
  std::shared_ptr<observe::TraceExporter> traces_;
  std::unique_ptr<AdminServer> server_;
};

}  // namespace kproxy::admin
