#include "proxy/toxiproxy/toxiproxy_runtime.h"

#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "proxy/net/bound_socket.h"
#include "tests/unit/support/captured_fd.h"
#include "tests/unit/support/http_exchange.h"
#include "tests/unit/support/test_ports.h"

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
  CHECK(net::bind_tcp_socket("127.0.0.1", port).socket);
}

TEST_CASE("without toxiproxy.listen nothing listens") {
  ToxiproxyRuntime runtime(config::ToxiproxyConfig{}, "v");
  CHECK(runtime.start() == "");
  CHECK(runtime.port() == 0);
}

TEST_CASE("start reports the API's bound address on standard output; stop closes it and every proxy, and may be called again") {
  config::ToxiproxyConfig config;
  config.listen = config::HostPort{"127.0.0.1", 0};
  ToxiproxyRuntime runtime(config, "v");
  const std::string nobody = "127.0.0.1:" + std::to_string(testing::reserved_port());  // nothing listens there
  std::string out;
  {
    testing::CapturedFd capture(STDOUT_FILENO);
    std::string error = runtime.start();
    out = capture.finish();
    REQUIRE(error == "");
  }
  const uint16_t api = runtime.port();
  REQUIRE(api != 0);
  CHECK(out.find("kproxy bound toxiproxy api 127.0.0.1:" + std::to_string(api) + "\n") != std::string::npos);

  auto created = post(api, "/proxies", R"({"name": "a", "listen": "127.0.0.1:0", "upstream": ")" + nobody + R"("})");
  REQUIRE(testing::http_status_of(created) == 201);
  auto listen = nlohmann::json::parse(body_of(created))["listen"].get<std::string>();
  auto proxy_port = static_cast<uint16_t>(std::stoi(listen.substr(listen.rfind(':') + 1)));
  int client = testing::loopback_connect(proxy_port);
  CHECK(client >= 0);  // the relay accepts on the proxy's port
  if (client >= 0) ::close(client);

  runtime.stop();
  CHECK(testing::loopback_connect(api) == -1);         // the API no longer listens
  CHECK(testing::loopback_connect(proxy_port) == -1);  // nor the proxy
  runtime.stop();                                      // idempotent
}

TEST_CASE("start fails, saying why, when the API's address is taken; a proxy beyond max_proxies is refused") {
  net::BoundSocket taken = net::bind_tcp_socket("127.0.0.1", 0);
  REQUIRE(taken.socket);
  REQUIRE(::listen(taken.socket.get(), 1) == 0);
  {
    config::ToxiproxyConfig config;
    config.listen = config::HostPort{"127.0.0.1", taken.port};
    ToxiproxyRuntime runtime(config, "v");
    std::string error = runtime.start();
    CHECK_FALSE(error.empty());
    CHECK(error.find(std::to_string(taken.port)) != std::string::npos);
    CHECK(runtime.port() == 0);
  }
  config::ToxiproxyConfig config;
  config.listen = config::HostPort{"127.0.0.1", 0};
  config.max_proxies = 1;
  ToxiproxyRuntime runtime(config, "v");
  const std::string nobody = "127.0.0.1:" + std::to_string(testing::reserved_port());
  REQUIRE(runtime.start() == "");
  CHECK(testing::http_status_of(
            post(runtime.port(), "/proxies", R"({"name": "a", "listen": "127.0.0.1:0", "upstream": ")" + nobody + R"("})")) == 201);
  auto over = post(runtime.port(), "/proxies", R"({"name": "b", "listen": "127.0.0.1:0", "upstream": ")" + nobody + R"("})");
  CHECK(testing::http_status_of(over) == 409);
  CHECK(nlohmann::json::parse(body_of(over))["error"] == "too many proxies: toxiproxy.max_proxies is 1");
  CHECK(runtime.table().list().body.size() == 1);
}
