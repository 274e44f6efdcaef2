// AdminRuntime: kproxy's admin listener, wired to the running daemon. It builds no service of
// its own: it registers routes over the process's (proxy/services/process_services.h).
//
//   main ──► ProcessServices ──► Proxy ──► AdminRuntime(proxy, services)
//                                            └─► AdminServer: /metrics /healthz /readyz /tap /log-level
//                                                  + /transactions, /listeners
//                                                  + chaos routes (/faults..., /api-versions, /reload)
//                                                  + /openapi.json (docs/admin-api.openapi.yaml)
//
// The bearer token comes from the config (admin.token_file, admin.token_env or $KPROXY_ADMIN_TOKEN,
// resolved and checked by the loader), else there is none.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "proxy/admin/admin_server.h"
#include "proxy/admin/health.h"
#include "proxy/admin/listener_routes.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/observe/transaction_tracker.h"
#include "proxy/runtime/proxy.h"
#include "proxy/services/process_services.h"
#include "proxy/tap/tap_hub.h"

namespace kproxy::admin {

class ChaosAdmin;

/// Registers every route kproxy's admin listener serves: the observability ones (over `metrics`
/// and `tap`), the transactions (from `transactions`), GET /listeners (from `listeners`), the chaos
/// ones and GET /openapi.json. AdminRuntime::start calls it; so does the test that checks the
/// routes against docs/admin-api.openapi.yaml (tests/unit/proxy/admin/openapi_test.cc).
void register_admin_routes(AdminServer& server, ChaosAdmin& chaos, Health& health, metrics::ProxyMetrics& metrics, tap::TapHub& tap,
                           std::shared_ptr<observe::TransactionTracker> transactions, ListenerSource listeners = {});

class AdminRuntime {
 public:
  /// `reload` re-reads the config file and applies it; returns "" or the errors.
  /// `services` must outlive the AdminRuntime.
  AdminRuntime(runtime::Proxy& proxy, services::ProcessServices& services, std::function<std::string()> reload);
  ~AdminRuntime();

  /// Starts the admin listener if the config has admin.listen. Returns "" or the error.
  std::string start();
  void stop();
  uint16_t port() const { return server_ ? server_->port() : 0; }

 private:
  runtime::Proxy& proxy_;
  services::ProcessServices& services_;
  std::unique_ptr<ChaosAdmin> chaos_admin_;
  std::unique_ptr<Health> health_;
  std::unique_ptr<AdminServer> server_;
};

}  // namespace kproxy::admin
