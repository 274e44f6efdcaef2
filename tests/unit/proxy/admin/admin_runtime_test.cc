// AdminRuntime over a (not started) Proxy and the process's services: it listens only when the
// config has admin.listen, serves every route kproxy's admin API has, and requires the config's
// bearer token when there is one. Ports come from tests/unit/support/test_ports.h.
#include "proxy/admin/admin_runtime.h"

#include <cstdlib>
#include <memory>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "config/config_loader.h"
#include "proxy/runtime/proxy.h"
#include "proxy/services/process_services.h"
#include "tests/unit/support/http_exchange.h"
#include "tests/unit/support/test_ports.h"

using namespace kproxy;

namespace {

/// A Proxy (never started: nothing listens for Kafka) and its services from a one-listener config
/// plus `extra`.
struct Daemon {
  std::shared_ptr<const config::Config> config;
  std::unique_ptr<services::ProcessServices> services;
  std::unique_ptr<runtime::Proxy> proxy;
  int reloads = 0;

  explicit Daemon(const std::string& extra) {
    uint16_t base = kproxy::testing::reserved_port_block(3);
    std::string yaml = "listeners:\n  - name: unit\n    listen: 127.0.0.1:" + std::to_string(base) +
                       "\n    upstream: 127.0.0.1:" + std::to_string(base + 1) + "\n    broker_ports: " + std::to_string(base + 2) +
                       "\nlog: { level: off }\n" + extra;
    auto loaded = config::load_config_string(yaml, "unit.yaml");
    REQUIRE_MESSAGE(loaded.ok(), loaded.error_text());
    config = loaded.config;
    services = std::make_unique<services::ProcessServices>(*config);
    proxy = std::make_unique<runtime::Proxy>(config, services->view());
  }
  std::function<std::string()> reload() {
    return [this] {
      ++reloads;
      return std::string();
    };
  }
};

std::string admin_at(uint16_t port) { return "admin: { listen: 127.0.0.1:" + std::to_string(port) + " }\n"; }

/// A raw exchange with the admin listener; `token` (when not empty) as the bearer token.
std::string exchange(uint16_t port, const std::string& method, const std::string& path, const std::string& token = "",
                     const std::string& body = "") {
  std::string raw = method + " " + path + " HTTP/1.1\r\nHost: x\r\n";
  if (!token.empty()) raw += "Authorization: Bearer " + token + "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT") raw += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  return kproxy::testing::http_exchange(port, raw + "\r\n" + body);
}

std::string body_of(const std::string& response) {
  auto at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

/// The token the loaded config requires, if any ($KPROXY_ADMIN_TOKEN may set one for every config).
std::string token_of(const Daemon& d) { return d.config->admin.token.value_or(""); }

}  // namespace

TEST_CASE("admin runtime: without admin.listen nothing listens") {
  Daemon d("");
  admin::AdminRuntime runtime(*d.proxy, *d.services, d.reload());
  CHECK(runtime.start() == "");
  CHECK(runtime.port() == 0);
  runtime.stop();
}

TEST_CASE("admin runtime: it listens on admin.listen and serves the observability, transaction, listener, chaos and openapi routes") {
  uint16_t port = kproxy::testing::reserved_port();
  Daemon d(admin_at(port));
  admin::AdminRuntime runtime(*d.proxy, *d.services, d.reload());
  REQUIRE(runtime.start() == "");
  CHECK(runtime.port() == port);
  const std::string token = token_of(d);

  std::string metrics = exchange(port, "GET", "/metrics", token);
  CHECK(kproxy::testing::http_status_of(metrics) == 200);
  CHECK(metrics.find("kproxy_admin_refusals_total") != std::string::npos);  // the server's refusals are exported

  std::string openapi = exchange(port, "GET", "/openapi.json", token);
  REQUIRE(kproxy::testing::http_status_of(openapi) == 200);
  CHECK(nlohmann::json::parse(body_of(openapi)).contains("paths"));

  std::string transactions = exchange(port, "GET", "/transactions", token);
  CHECK(kproxy::testing::http_status_of(transactions) == 200);

  std::string listeners = exchange(port, "GET", "/listeners", token);
  REQUIRE(kproxy::testing::http_status_of(listeners) == 200);
  CHECK(body_of(listeners).find("\"unit\"") != std::string::npos);  // the config's listener, from the Proxy

  std::string faults = exchange(port, "GET", "/faults", token);
  CHECK(kproxy::testing::http_status_of(faults) == 200);

  // POST /reload runs the reload the runtime was given.
  std::string reload = exchange(port, "POST", "/reload", token);
  CHECK(kproxy::testing::http_status_of(reload) == 200);
  CHECK(d.reloads == 1);

  // Not started: the proxy is not ready.
  std::string ready = exchange(port, "GET", "/readyz", token);
  CHECK(kproxy::testing::http_status_of(ready) == 503);
  CHECK(body_of(ready).find("starting") != std::string::npos);
  runtime.stop();
}

TEST_CASE("admin runtime: the config's bearer token is required") {
  uint16_t port = kproxy::testing::reserved_port();
  REQUIRE(::setenv("KPROXY_ADMIN_RUNTIME_TEST_TOKEN", "s3cret-admin-token", 1) == 0);
  Daemon d("admin:\n  listen: 127.0.0.1:" + std::to_string(port) + "\n  token_env: KPROXY_ADMIN_RUNTIME_TEST_TOKEN\n");
  ::unsetenv("KPROXY_ADMIN_RUNTIME_TEST_TOKEN");
  REQUIRE(d.config->admin.token == "s3cret-admin-token");
  admin::AdminRuntime runtime(*d.proxy, *d.services, d.reload());
  REQUIRE(runtime.start() == "");

  CHECK(kproxy::testing::http_status_of(exchange(port, "GET", "/metrics")) == 401);
  CHECK(kproxy::testing::http_status_of(exchange(port, "GET", "/metrics", "wrong-token")) == 401);
  CHECK(kproxy::testing::http_status_of(exchange(port, "GET", "/metrics", "s3cret-admin-token")) == 200);
  CHECK(kproxy::testing::http_status_of(exchange(port, "POST", "/reload")) == 401);
  CHECK(d.reloads == 0);  // refused before the handler ran
  runtime.stop();
}

TEST_CASE("admin runtime: an address already in use is an error and nothing listens") {
  uint16_t port = kproxy::testing::reserved_port();
  Daemon first(admin_at(port));
  admin::AdminRuntime holder(*first.proxy, *first.services, first.reload());
  REQUIRE(holder.start() == "");

  Daemon second(admin_at(port));
  admin::AdminRuntime runtime(*second.proxy, *second.services, second.reload());
  std::string error = runtime.start();
  INFO(error);
  CHECK_FALSE(error.empty());
  CHECK(runtime.port() == 0);
  runtime.stop();
  holder.stop();
}
