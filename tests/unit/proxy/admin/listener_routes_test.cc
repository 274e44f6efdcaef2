#include "proxy/admin/listener_routes.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>

#include "config/config_loader.h"
#include "tests/unit/support/services.h"
#include "tests/unit/support/test_ports.h"

using namespace kproxy;
using namespace std::chrono_literals;

namespace {

/// `raw` (request line, headers, body) served by `server` as if it had arrived over HTTP.
admin::HttpResponse serve(const admin::AdminServer& server, const std::string& raw) {
  return server.handle_message(raw.find("\r\n\r\n") == std::string::npos ? raw + "\r\nHost: t\r\n\r\n" : raw);
}

/// A Proxy of one config-file listener "kafka" (port 0, kernel broker ports), not started.
struct IdleProxy {
  testing::TestServices services;
  std::unique_ptr<runtime::Proxy> proxy;
  IdleProxy() {
    std::string yaml =
        "listeners:\n  - name: kafka\n    listen: 127.0.0.1:0\n    upstream: 127.0.0.1:" + std::to_string(testing::reserved_port()) +
        "\n    broker_ports: 0\nlog: { level: off }\n";
    auto loaded = config::load_config_string(yaml, "unit.yaml");
    REQUIRE_MESSAGE(loaded.ok(), loaded.error_text());
    proxy = std::make_unique<runtime::Proxy>(loaded.config, services.view());
  }
};

}  // namespace

TEST_CASE("GET /listeners shows bound addresses, advertised ones and the real brokers") {
  admin::ListenerSnapshot l;
  l.name = "kafka";
  l.bind_host = "127.0.0.1";
  l.port = 41234;
  l.advertise = "proxy.local";
  l.broker_ports = "kernel";
  l.brokers.push_back({1, config::HostPort{"10.0.0.1", 9092}, 41235, true});
  admin::ListenerSnapshot unbound;
  unbound.name = "west";
  unbound.bind_host = "::1";
  unbound.advertise = "::1";
  unbound.broker_ports = "node_id_offset";
  auto body = admin::listeners_json({l, unbound}, "127.0.0.1:9644");
  CHECK(body["admin"] == "127.0.0.1:9644");
  REQUIRE(body["listeners"].size() == 2);
  const auto& k = body["listeners"][0];
  CHECK(k["name"] == "kafka");
  CHECK(k["address"] == "127.0.0.1:41234");
  CHECK(k["broker_ports"] == "kernel");
  REQUIRE(k["brokers"].size() == 1);
  CHECK(k["brokers"][0]["node_id"] == 1);
  CHECK(k["brokers"][0]["address"] == "127.0.0.1:41235");
  CHECK(k["brokers"][0]["advertised"] == "proxy.local:41235");
  CHECK(k["brokers"][0]["broker"] == "10.0.0.1:9092");
  CHECK(k["brokers"][0]["listening"] == true);
  CHECK(body["listeners"][1]["address"].is_null());  // not bound yet
  CHECK(body["listeners"][1]["brokers"].empty());

  // A node with its own advertised address (`advertise: "1=host:port"`) shows that address.
  l.advertise_nodes = {{1, config::HostPort{"localhost", 32771}}};
  auto mapped = admin::listeners_json({l}, "127.0.0.1:9644");
  CHECK(mapped["listeners"][0]["brokers"][0]["advertised"] == "localhost:32771");
  CHECK(mapped["listeners"][0]["brokers"][0]["address"] == "127.0.0.1:41235");  // where kproxy listens for it
}

TEST_CASE("GET /listeners reads its source at every request; an empty source shows no listeners and no admin address") {
  admin::AdminServer empty;
  admin::register_listener_routes(empty, admin::ListenerSource{});
  auto none = serve(empty, "GET /listeners HTTP/1.1");
  CHECK(none.status == 200);
  CHECK(nlohmann::json::parse(none.body) == nlohmann::json::parse(R"({"listeners": [], "admin": ""})"));

  std::atomic<int> reads{0};
  admin::ListenerSource source;
  source.listeners = [&reads] {
    admin::ListenerSnapshot l;
    l.name = "kafka-" + std::to_string(++reads);
    l.bind_host = "127.0.0.1";
    l.advertise = "127.0.0.1";
    l.broker_ports = "kernel";
    return std::vector<admin::ListenerSnapshot>{l};
  };
  source.admin_address = [] { return std::string("127.0.0.1:9644"); };
  admin::AdminServer server;
  admin::register_listener_routes(server, source);
  auto first = nlohmann::json::parse(serve(server, "GET /listeners HTTP/1.1").body);
  auto second = nlohmann::json::parse(serve(server, "GET /listeners HTTP/1.1").body);
  CHECK(first["listeners"][0]["name"] == "kafka-1");
  CHECK(second["listeners"][0]["name"] == "kafka-2");  // read again, not cached
  CHECK(second["admin"] == "127.0.0.1:9644");
  CHECK(second["listeners"][0]["runtime"] == false);
  CHECK(serve(server, "GET /listeners HTTP/1.1").body.back() == '\n');
}

TEST_CASE("PUT and DELETE /listeners/{name}: the name and body reach the handlers, ?drain= is a duration up to 3h") {
  admin::AdminServer bare;
  admin::register_listener_routes(bare, admin::ListenerSource{});
  CHECK(serve(bare, "PUT /listeners/x HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}").status == 503);
  CHECK(serve(bare, "DELETE /listeners/x HTTP/1.1").status == 404);

  std::string put_name, put_body, removed;
  std::chrono::milliseconds drain{-1};
  admin::ListenerSource source;
  source.put = [&](const std::string& name, const std::string& body) {
    put_name = name;
    put_body = body;
    return admin::HttpResponse{201, "application/json", "{}"};
  };
  source.remove = [&](const std::string& name, std::chrono::milliseconds d) {
    removed = name;
    drain = d;
    return admin::HttpResponse{204, "application/json", ""};
  };
  admin::AdminServer server;
  admin::register_listener_routes(server, source);
  CHECK(serve(server, "PUT /listeners/extra HTTP/1.1\r\nHost: t\r\nContent-Length: 9\r\n\r\nlisten: 1").status == 201);
  CHECK(put_name == "extra");
  CHECK(put_body == "listen: 1");
  CHECK(serve(server, "DELETE /listeners/extra HTTP/1.1").status == 204);
  CHECK(removed == "extra");
  CHECK(drain == 5000ms);  // the default
  CHECK(serve(server, "DELETE /listeners/extra?drain=250ms HTTP/1.1").status == 204);
  CHECK(drain == 250ms);
  CHECK(serve(server, "DELETE /listeners/extra?drain=0s HTTP/1.1").status == 204);
  CHECK(drain == 0ms);
  CHECK(serve(server, "DELETE /listeners/extra?drain=3h HTTP/1.1").status == 204);
  CHECK(drain == 3h);
  removed.clear();
  auto too_long = serve(server, "DELETE /listeners/extra?drain=4h HTTP/1.1");
  CHECK(too_long.status == 400);
  CHECK(too_long.body.find("drain: '4h'") != std::string::npos);
  CHECK(serve(server, "DELETE /listeners/extra?drain=soon HTTP/1.1").status == 400);
  CHECK(removed.empty());  // refused before the handler
}

TEST_CASE("put_listener, delete_listener and listener_snapshots on a Proxy: names checked, the config file's listeners kept") {
  IdleProxy p;
  auto snapshots = admin::listener_snapshots(*p.proxy);
  REQUIRE(snapshots.size() == 1);
  CHECK(snapshots[0].name == "kafka");
  CHECK(snapshots[0].bind_host == "127.0.0.1");
  CHECK(snapshots[0].port == 0);  // not started: nothing bound
  CHECK(snapshots[0].broker_ports == "kernel");
  CHECK_FALSE(snapshots[0].runtime);

  const std::string body =
      R"({"listen": "127.0.0.1:0", "broker_ports": 0, "upstream": "127.0.0.1:)" + std::to_string(testing::reserved_port()) + R"("})";
  for (const char* bad : {"", ".", "..", "a b", "caf\xC3\xA9"}) CHECK_MESSAGE(admin::put_listener(*p.proxy, bad, body).status == 400, bad);
  CHECK(admin::put_listener(*p.proxy, std::string(129, 'a'), body).status == 400);
  auto taken = admin::put_listener(*p.proxy, "kafka", body);
  CHECK(taken.status == 409);
  CHECK(taken.body.find("in the config file") != std::string::npos);
  CHECK(admin::put_listener(*p.proxy, "extra", "[1, 2]").status == 400);  // not a listener entry
  auto idle = admin::put_listener(*p.proxy, "extra", body);
  INFO(idle.body);
  CHECK(idle.status == 503);  // a valid entry, but kproxy is not running
  CHECK(admin::listener_snapshots(*p.proxy).size() == 1);

  CHECK(admin::delete_listener(*p.proxy, "kafka", 0ms).status == 409);
  CHECK(admin::delete_listener(*p.proxy, "extra", 0ms).status == 404);
}
