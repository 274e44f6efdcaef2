// The admin routes this module serves itself: /metrics, /healthz, /readyz, /tap, /log-level.
// Other modules (fault rules, reload, ApiVersions) register theirs on the same AdminServer.
//
//   GET /metrics            Prometheus text format 0.0.4 (kproxy_* families, see proxy_metrics.h)
//   GET /healthz            200/503 + JSON: every worker loop answered a ping (see health.h)
//   GET /readyz             200/503 + JSON: every listener's upstream bootstrap answered
//   GET /tap?api=&client_id=&connection=&direction=&errors=
//                           decoded traffic as JSON lines (application/x-ndjson), streamed
//                           until the client goes away; blank lines are keep-alives
//   GET /log-level          {"level": "info"}
//   PUT /log-level          body {"level": "debug"} (or ?level=debug): changes spdlog's level
#pragma once

#include "proxy/admin/admin_server.h"
#include "proxy/admin/health.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/tap/tap_hub.h"

namespace kproxy::admin {

void register_observability_routes(AdminServer& server, metrics::ProxyMetrics& metrics, tap::TapHub& hub, Health& health);

}  // namespace kproxy::admin
