// The routes of Toxiproxy v2's HTTP API (docs/toxiproxy.md "Endpoints"), served by an
// AdminServer of their own (proxy/admin/admin_server.h: the same reader thread, lanes and limits
// as kproxy's admin API, on another port):
//
//   GET  /version                          {"version": "..."}
//   GET  /proxies                          {name: proxy, ...}
//   POST /proxies                          201 proxy           POST /populate   201 {"proxies": [...]}
//   GET|PATCH|POST|DELETE /proxies/{proxy}                     (POST: Toxiproxy's older update verb)
//   GET|POST /proxies/{proxy}/toxics
//   GET|PATCH|POST|DELETE /proxies/{proxy}/toxics/{toxic}
//   POST /reset                            204
//
// Each route hands its body to the ProxyTable (proxy/toxiproxy/proxy_table.h), which answers in
// Toxiproxy's shapes; errors are {"error": message, "status": status}.
#pragma once

#include <string>

#include "proxy/admin/admin_server.h"
#include "proxy/toxiproxy/proxy_table.h"

namespace kproxy::toxiproxy {

/// The HTTP response for `answer` (no body for 204).
admin::HttpResponse to_http(const ApiAnswer& answer);

/// Registers every route above on `server`; `table` must outlive it. `version` is what GET
/// /version reports.
void register_toxiproxy_routes(admin::AdminServer& server, ProxyTable& table, std::string version);

}  // namespace kproxy::toxiproxy
