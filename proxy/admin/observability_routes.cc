#include "proxy/admin/observability_routes.h"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "proxy/util/clock.h"

namespace kproxy::admin {
namespace {

constexpr auto kTapPoll = std::chrono::milliseconds(250);
constexpr auto kTapKeepAlive = std::chrono::seconds(2);

}  // namespace

void register_observability_routes(AdminServer& server, metrics::ProxyMetrics& metrics, tap::TapHub& hub, Health& health) {
  metrics.export_counter(hub.dropped_counter());
  metrics.add_gauge("kproxy_tap_subscribers", "Clients following GET /tap now.", "", [&hub] {
    return std::vector<std::pair<std::string, double>>{{"", static_cast<double>(hub.subscriber_count())}};
  });

  server.route("GET", "/metrics", [&metrics](const HttpRequest&) {
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics.render()};
  });
  server.route("GET", "/healthz", [&health](const HttpRequest&) {
    HealthReport r = health.liveness();
    return HttpResponse{r.ok ? 200 : 503, "application/json", r.json};
  });
  server.route("GET", "/readyz", [&health](const HttpRequest&) {
    HealthReport r = health.readiness();
    return HttpResponse{r.ok ? 200 : 503, "application/json", r.json};
  });
  server.route("GET", "/log-level", [](const HttpRequest&) {
    auto level = spdlog::level::to_string_view(spdlog::get_level());
    return HttpResponse{200, "application/json", nlohmann::json{{"level", std::string(level.data(), level.size())}}.dump() + "\n"};
  });
  server.route("PUT", "/log-level", [](const HttpRequest& r) {
    // The level comes from ?level= or from the body. Each, when given, must be valid, so no
    // invalid input is silently ignored; when both are given, the body's level is set
    // (docs/admin-api.openapi.yaml: any schema-valid request is a valid one).
    static const char* kLevels[] = {"trace", "debug", "info", "warn", "warning", "error", "err", "critical", "off"};
    auto known = [](const std::string& level) {
      for (const char* l : kLevels) {
        if (level == l) return true;
      }
      return false;
    };
    std::string level = r.query_param("level");
    if (r.query_params.count("level") && level.empty()) return json_error(400, "?level= names no level");
    if (!level.empty() && !known(level)) return json_error(400, "unknown log level '" + level + "'");
    const bool has_body = r.body.find_first_not_of(" \t\r\n") != std::string::npos;
    if (level.empty() && !has_body) {  // nothing to set: the level stays, and is answered
      auto current = spdlog::level::to_string_view(spdlog::get_level());
      return HttpResponse{200, "application/json", nlohmann::json{{"level", std::string(current.data(), current.size())}}.dump() + "\n"};
    }
    if (has_body) {
      auto body = nlohmann::json::parse(r.body, nullptr, false);
      if (body.is_discarded() || !body.is_object() || !body.contains("level") || !body["level"].is_string()) {
        return json_error(400, "want {\"level\": \"trace|debug|info|warn|error|critical|off\"} or ?level=");
      }
      level = body["level"].get<std::string>();
      if (!known(level)) return json_error(400, "unknown log level '" + level + "'");
    }
    spdlog::set_level(spdlog::level::from_str(level));
    spdlog::info("admin: log level set to {}", level);
    return HttpResponse{200, "application/json", nlohmann::json{{"level", level}}.dump() + "\n"};
  });

  server.stream_route(
      "/tap", "application/x-ndjson",
      [&hub](const HttpRequest& r) {
        tap::TapFilter filter;
        std::string error = tap::parse_filter(r.query_params, filter);
        if (!error.empty()) return json_error(400, error);
        if (hub.subscriber_count() >= hub.limits().max_subscribers) {
          return json_error(503, "too many tap subscribers (limit " + std::to_string(hub.limits().max_subscribers) + ")");
        }
        return HttpResponse{};
      },
      [&hub](const HttpRequest& r, StreamWriter& out) {
        tap::TapFilter filter;
        tap::parse_filter(r.query_params, filter);
        auto subscriber = hub.subscribe(filter);
        if (!subscriber) {
          out.write("{\"error\":\"too many tap subscribers\"}\n");
          return;
        }
        auto last_write = util::steady_clock().now();
        while (!out.stopping() && !subscriber->closed()) {
          std::string lines = subscriber->next(kTapPoll);
          auto now = util::steady_clock().now();
          if (lines.empty() && now - last_write >= kTapKeepAlive) lines = "\n";  // finds a reader gone while idle
          if (lines.empty()) continue;
          if (!out.write(lines)) break;
          last_write = now;
        }
        hub.unsubscribe(subscriber);
      });
}

}  // namespace kproxy::admin
