// /metrics, /healthz, /readyz, /log-level (through AdminServer::handle) and /tap (a stream: over
// HTTP on a reserved loopback port), as register_observability_routes registers them.
#include "proxy/admin/observability_routes.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <doctest/doctest.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "tests/unit/support/http_exchange.h"
#include "tests/unit/support/test_ports.h"

using namespace kproxy;
using namespace std::chrono_literals;

namespace {

admin::HttpRequest request(const std::string& method, const std::string& path, std::string body = "") {
  admin::HttpRequest r;
  r.method = method;
  r.path = path;
  r.body = std::move(body);
  return r;
}

/// Health over one worker whose pings run at once, and `upstream` (nothing listens there unless
/// the test marks it answered).
admin::HealthHooks one_worker(const std::string& upstream, bool& draining) {
  admin::HealthHooks hooks;
  hooks.worker_count = [] { return size_t{1}; };
  hooks.post = [](size_t, std::function<void()> task) { task(); };
  hooks.upstreams = [upstream] { return std::vector<std::string>{upstream}; };
  hooks.draining = [&draining] { return draining; };
  hooks.started = [] { return true; };
  return hooks;
}

/// Restores spdlog's level when the test ends.
struct LevelGuard {
  spdlog::level::level_enum saved = spdlog::get_level();
  ~LevelGuard() { spdlog::set_level(saved); }
};

std::string upstream_nobody_listens_on() { return "127.0.0.1:" + std::to_string(kproxy::testing::reserved_port()); }

/// The observability routes over a test's own metrics, tap hub and health (one worker whose
/// upstream nobody listens on); a TEST_CASE_FIXTURE's body sees the members by name.
struct Routes {
  metrics::ProxyMetrics metrics;
  tap::TapHub hub;
  bool draining = false;
  admin::Health health{one_worker(upstream_nobody_listens_on(), draining), 500ms, 500ms};
  admin::AdminServer server;
  Routes() { admin::register_observability_routes(server, metrics, hub, health); }
};

}  // namespace

TEST_CASE_FIXTURE(Routes, "observability routes: GET /metrics renders the metrics, with the tap's subscriber gauge") {
  metrics.count(metrics::ProxyEvent::kResponseRewritten, 3);
  auto subscriber = hub.subscribe(tap::TapFilter{});
  admin::HttpResponse r = server.handle(request("GET", "/metrics"));
  CHECK(r.status == 200);
  CHECK(r.content_type.find("version=0.0.4") != std::string::npos);
  INFO(r.body);
  CHECK(r.body.find("kproxy_tap_subscribers 1") != std::string::npos);
  CHECK(r.body.find("responses_rewritten") != std::string::npos);
  CHECK(r.body.find("kproxy_tap_events_dropped_total") != std::string::npos);  // the hub's counter is exported
  hub.unsubscribe(subscriber);
  CHECK(server.handle(request("GET", "/metrics")).body.find("kproxy_tap_subscribers 0") != std::string::npos);
}

TEST_CASE_FIXTURE(Routes, "observability routes: /healthz and /readyz answer 200 or 503 from Health") {
  admin::HttpResponse live = server.handle(request("GET", "/healthz"));
  CHECK(live.status == 200);
  CHECK(live.content_type == "application/json");

  admin::HttpResponse not_ready = server.handle(request("GET", "/readyz"));
  CHECK(not_ready.status == 503);  // the upstream never answered
  CHECK(nlohmann::json::parse(not_ready.body)["status"] == "not ready");

  health.upstream_answered(0);
  admin::HttpResponse ready = server.handle(request("GET", "/readyz"));
  CHECK(ready.status == 200);
  CHECK(nlohmann::json::parse(ready.body)["status"] == "ready");
  draining = true;
  CHECK(server.handle(request("GET", "/readyz")).status == 503);
}

TEST_CASE("observability routes: PUT /log-level sets spdlog's level from the body or ?level=; bad levels are refused") {
  LevelGuard guard;
  metrics::ProxyMetrics metrics;
  tap::TapHub hub;
  bool draining = false;
  admin::Health health(one_worker(upstream_nobody_listens_on(), draining), 500ms, 500ms);
  admin::AdminServer server;
  admin::register_observability_routes(server, metrics, hub, health);

  spdlog::set_level(spdlog::level::warn);
  admin::HttpResponse set = server.handle(request("PUT", "/log-level", R"({"level":"debug"})"));
  CHECK(set.status == 200);
  CHECK(spdlog::get_level() == spdlog::level::debug);
  CHECK(nlohmann::json::parse(server.handle(request("GET", "/log-level")).body)["level"] == "debug");

  admin::HttpRequest by_query = request("PUT", "/log-level");
  by_query.query_params["level"] = "error";
  CHECK(server.handle(by_query).status == 200);
  CHECK(spdlog::get_level() == spdlog::level::err);

  admin::HttpRequest unknown = request("PUT", "/log-level");
  unknown.query_params["level"] = "loud";
  admin::HttpResponse refused = server.handle(unknown);
  CHECK(refused.status == 400);
  CHECK(refused.body.find("unknown log level 'loud'") != std::string::npos);
  CHECK(server.handle(request("PUT", "/log-level", R"({"lvl":"info"})")).status == 400);
  CHECK(server.handle(request("PUT", "/log-level", "not json")).status == 400);
  CHECK(spdlog::get_level() == spdlog::level::err);  // nothing refused changed it

  // Neither a level nor a body: the level stays, and is answered.
  admin::HttpResponse nothing = server.handle(request("PUT", "/log-level"));
  CHECK(nothing.status == 200);
  CHECK(nlohmann::json::parse(nothing.body)["level"] == "error");
}

TEST_CASE("observability routes: GET /tap streams published lines; a bad filter gets 400, a full hub 503") {
  metrics::ProxyMetrics metrics;
  tap::TapHub hub;
  bool draining = false;
  admin::Health health(one_worker(upstream_nobody_listens_on(), draining), 500ms, 500ms);
  admin::AdminServerOptions options;
  uint16_t port = kproxy::testing::reserved_port();
  options.listen = "127.0.0.1:" + std::to_string(port);
  admin::AdminServer server(options);
  admin::register_observability_routes(server, metrics, hub, health);
  REQUIRE(server.start() == "");

  std::string bad = kproxy::testing::http_exchange(port, "GET /tap?direction=sideways HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(kproxy::testing::http_status_of(bad) == 400);

  // A subscriber: the stream stays open and carries what the hub publishes.
  int fd = kproxy::testing::loopback_connect(port);
  REQUIRE(fd >= 0);
  timeval tv{0, 200 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string head = "GET /tap HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (hub.subscriber_count() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  REQUIRE(hub.subscriber_count() == 1);
  hub.publish(tap::TapEventMeta{}, R"({"marker":"tap-line-1"})");
  std::string got;
  char buf[4096];
  while (got.find("tap-line-1") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    if (n == 0) break;
  }
  INFO(got);
  CHECK(kproxy::testing::http_status_of(got) == 200);
  CHECK(got.find("application/x-ndjson") != std::string::npos);
  CHECK(got.find("tap-line-1") != std::string::npos);

  // The hub is full (max_subscribers 1 with one connected): the next one is refused.
  tap::TapLimits limits = hub.limits();
  limits.max_subscribers = 1;
  hub.set_limits(limits);
  std::string full = kproxy::testing::http_exchange(port, "GET /tap HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(kproxy::testing::http_status_of(full) == 503);

  ::close(fd);
  hub.close_all();  // ends the stream, so that the server's thread ends
  server.stop();
}
