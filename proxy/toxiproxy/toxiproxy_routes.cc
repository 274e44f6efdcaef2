#include "proxy/toxiproxy/toxiproxy_routes.h"

#include <utility>

#include "proxy/toxiproxy/openapi_document.h"

namespace kproxy::toxiproxy {

admin::HttpResponse to_http(const ApiAnswer& answer) {
  if (answer.status == 204 || answer.body.is_null()) return {answer.status, "application/json", ""};
  return {answer.status, "application/json", answer.body.dump() + "\n"};
}

void register_toxiproxy_routes(admin::AdminServer& server, ProxyTable& table, std::string version) {
  using admin::HttpRequest;
  using admin::HttpResponse;
  auto proxy = [](const HttpRequest& r) -> const std::string& { return r.path_params.at("proxy"); };
  auto toxic = [](const HttpRequest& r) -> const std::string& { return r.path_params.at("toxic"); };

  server.route("GET", "/version", [version = std::move(version)](const HttpRequest&) {
    nlohmann::ordered_json body;
    body["version"] = version;
    return HttpResponse{200, "application/json;charset=utf-8", body.dump() + "\n"};
  });
  // kproxy's extension: this API's contract (docs/toxiproxy-api.openapi.yaml).
  server.route("GET", "/openapi.json", [](const HttpRequest&) {
    return HttpResponse{200, "application/json", std::string(openapi_json())};
  });
  server.route("GET", "/proxies", [&table](const HttpRequest&) { return to_http(table.list()); });
  server.route("POST", "/proxies", [&table](const HttpRequest& r) { return to_http(table.create(r.body)); });
  server.route("POST", "/populate", [&table](const HttpRequest& r) { return to_http(table.populate(r.body)); });
  server.route("POST", "/reset", [&table](const HttpRequest&) { return to_http(table.reset()); });
  server.route("GET", "/proxies/{proxy}", [&table, proxy](const HttpRequest& r) { return to_http(table.show(proxy(r))); });
  for (const char* verb : {"PATCH", "POST"}) {
    server.route(verb, "/proxies/{proxy}", [&table, proxy](const HttpRequest& r) { return to_http(table.update(proxy(r), r.body)); });
    server.route(verb, "/proxies/{proxy}/toxics/{toxic}",
                 [&table, proxy, toxic](const HttpRequest& r) { return to_http(table.update_toxic(proxy(r), toxic(r), r.body)); });
  }
  server.route("DELETE", "/proxies/{proxy}", [&table, proxy](const HttpRequest& r) { return to_http(table.remove(proxy(r))); });
  server.route("GET", "/proxies/{proxy}/toxics", [&table, proxy](const HttpRequest& r) { return to_http(table.list_toxics(proxy(r))); });
  server.route("POST", "/proxies/{proxy}/toxics",
               [&table, proxy](const HttpRequest& r) { return to_http(table.add_toxic(proxy(r), r.body)); });
  server.route("GET", "/proxies/{proxy}/toxics/{toxic}",
               [&table, proxy, toxic](const HttpRequest& r) { return to_http(table.show_toxic(proxy(r), toxic(r))); });
  server.route("DELETE", "/proxies/{proxy}/toxics/{toxic}",
               [&table, proxy, toxic](const HttpRequest& r) { return to_http(table.remove_toxic(proxy(r), toxic(r))); });
}

}  // namespace kproxy::toxiproxy
