// Registers the chaos admin routes (admin_routes.h) on the admin HTTP server. Header-only so that
// kproxy_core does not depend on the admin server: include it where the AdminServer is set up:
//
//   kproxy::chaos::ChaosAdmin chaos_admin(proxy.chaos(), [&] { return reload_config(); });
//   kproxy::chaos::register_chaos_routes(chaos_admin, admin_server);  // chaos_admin must outlive the server
#pragma once

#include "proxy/admin/admin_server.h"
#include "proxy/chaos/admin_routes.h"

namespace kproxy::chaos {

inline void register_chaos_routes(ChaosAdmin& chaos, admin::AdminServer& server) {
  auto wrap = [](ChaosHttpResponse r) { return admin::HttpResponse{r.status, "application/json", std::move(r.body)}; };
  server.route("GET", "/faults", [&chaos, wrap](const admin::HttpRequest&) { return wrap(chaos.list_faults()); });
  server.route("PUT", "/faults/{name}", [&chaos, wrap](const admin::HttpRequest& r) { return wrap(chaos.put_fault(r.path_params.at("name"), r.body)); });
  server.route("GET", "/faults/{name}", [&chaos, wrap](const admin::HttpRequest& r) { return wrap(chaos.get_fault(r.path_params.at("name"))); });
  server.route("DELETE", "/faults/{name}", [&chaos, wrap](const admin::HttpRequest& r) { return wrap(chaos.delete_fault(r.path_params.at("name"))); });
  server.route("POST", "/faults/reset", [&chaos, wrap](const admin::HttpRequest&) { return wrap(chaos.reset_faults()); });
  server.route("GET", "/api-versions", [&chaos, wrap](const admin::HttpRequest&) { return wrap(chaos.get_api_versions()); });
  server.route("PUT", "/api-versions", [&chaos, wrap](const admin::HttpRequest& r) { return wrap(chaos.put_api_versions(r.body)); });
  server.route("POST", "/reload", [&chaos, wrap](const admin::HttpRequest&) { return wrap(chaos.reload()); });
}

}  // namespace kproxy::chaos
