#include "proxy/toxiproxy/toxiproxy_runtime.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "proxy/net/bound_socket.h"
#include "tests/unit/support/http_exchange.h"

using namespace kproxy;
using namespace kproxy::toxiproxy;

namespace {

std::string body_of(const std::string& response) {
  auto at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

std::string post(uint16_t port, const std::string& path, const std::string& body) {
  return testing::http_exchange(port, "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
                                          std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

}  // namespace

TEST_CASE("the Toxiproxy API listens on its own port when toxiproxy.listen is set") {
  config::ToxiproxyConfig config;
  config.listen = config::HostPort{"127.0.0.1", 0};
  config.max_proxies = 2;
  ToxiproxyRuntime runtime(config, "kproxy test");
  REQUIRE(runtime.start() == "");
  REQUIRE(runtime.port() != 0);
  auto version = testing::http_exchange(runtime.port(), "GET /version HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  CHECK(testing::http_status_of(version) == 200);
  CHECK(nlohmann::json::parse(body_of(version))["version"] == "kproxy test");

  // The relay binds the address: port 0 becomes the kernel's pick, a taken one is a 409.
  auto created = post(runtime.port(), "/proxies", R"({"name": "a", "listen": "localhost:0", "upstream": "127.0.0.1:9"})");
  REQUIRE(testing::http_status_of(created) == 201);
  auto listen = nlohmann::json::parse(body_of(created))["listen"].get<std::string>();
  CHECK(listen.rfind("127.0.0.1:", 0) == 0);
  CHECK(listen != "127.0.0.1:0");
  auto clash = post(runtime.port(), "/proxies", R"({"name": "b", "listen": ")" + listen + R"(", "upstream": "127.0.0.1:9"})");
  CHECK(testing::http_status_of(clash) == 409);
  CHECK(nlohmann::json::parse(body_of(clash))["error"].get<std::string>().find("in use") != std::string::npos);
  auto bad = post(runtime.port(), "/proxies", R"({"name": "c", "listen": "no-port", "upstream": "127.0.0.1:9"})");
  CHECK(testing::http_status_of(bad) == 400);
  auto named = post(runtime.port(), "/proxies", R"({"name": "d", "listen": "example.com:0", "upstream": "127.0.0.1:9"})");
  CHECK(testing::http_status_of(named) == 400);
  runtime.stop();
  // Stopped: the proxy's address is free again.
  auto port = static_cast<uint16_t>(std::stoi(listen.substr(listen.rfind(':') + 1)));
  CHECK(proxy::bind_tcp_socket("127.0.0.1", port).socket);
}

TEST_CASE("without toxiproxy.listen nothing listens") {
  ToxiproxyRuntime runtime(config::ToxiproxyConfig{}, "v");
  CHECK(runtime.start() == "");
  CHECK(runtime.port() == 0);
}
