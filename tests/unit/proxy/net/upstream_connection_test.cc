#include "proxy/net/upstream_connection.h"

#include <doctest/doctest.h>

#include "tests/unit/support/test_ports.h"

#include <string>

using namespace kproxy;
using namespace std::chrono_literals;

namespace {

struct Events final : net::TcpStreamEvents, net::UpstreamConnectionEvents {
  net::UpstreamConnection* upstream = nullptr;
  int connected = 0;
  std::string failure;
  int released_parts = 0;
  void on_stream_read(net::TcpStream&, codec::Bytes) override {}
  void on_stream_error(net::TcpStream& s, int, const char*) override { s.close(); }
  void on_stream_writable(net::TcpStream&) override {}
  void on_stream_closed(net::TcpStream&) override {}
  void on_upstream_connected() override {
    ++connected;
    upstream->close(/*flush_first=*/true);
  }
  void on_upstream_connect_failed(const std::string& reason) override {
    failure = reason;
    upstream->close(false);
  }
  void on_upstream_part_released() override { ++released_parts; }
};

/// A port nobody listens on (reserved for this run, so no other process binds it meanwhile).
uint16_t unused_port() { return kproxy::testing::reserved_port(); }

void run_and_close(uv_loop_t* loop) {
  uv_run(loop, UV_RUN_DEFAULT);
  uv_walk(
      loop,
      [](uv_handle_t* h, void*) {
        if (!uv_is_closing(h)) uv_close(h, nullptr);
      },
      nullptr);
  uv_run(loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(loop) == 0);
}

}  // namespace

TEST_CASE("connect refused is reported with the target and the reason") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Events events;
  net::SelfConnectionDetector self_connections;
  net::UpstreamConnection upstream(&loop, events, events, self_connections);
  events.upstream = &upstream;
  uint16_t port = unused_port();
  upstream.connect({"127.0.0.1", port}, 5s);
  run_and_close(&loop);
  CHECK(events.connected == 0);
  CHECK(events.failure == "cannot connect to 127.0.0.1:" + std::to_string(port) + ": connection refused");
  CHECK(upstream.released());
}

TEST_CASE("an unresolvable host fails") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Events events;
  net::SelfConnectionDetector self_connections;
  net::UpstreamConnection upstream(&loop, events, events, self_connections);
  events.upstream = &upstream;
  upstream.connect({"no-such-host.invalid", 9092}, 5s);
  run_and_close(&loop);
  CHECK(events.failure.rfind("cannot resolve no-such-host.invalid:9092", 0) == 0);
  CHECK(upstream.released());
}

TEST_CASE("a successful connect, then close releases every part") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  uv_tcp_t server;
  uv_tcp_init(&loop, &server);
  sockaddr_in a;
  uv_ip4_addr("127.0.0.1", 0, &a);
  uv_tcp_bind(&server, reinterpret_cast<sockaddr*>(&a), 0);
  uv_listen(reinterpret_cast<uv_stream_t*>(&server), 4, [](uv_stream_t*, int) {});
  int len = sizeof(a);
  uv_tcp_getsockname(&server, reinterpret_cast<sockaddr*>(&a), &len);
  Events events;
  net::SelfConnectionDetector self_connections;
  net::UpstreamConnection upstream(&loop, events, events, self_connections);
  events.upstream = &upstream;
  upstream.connect({"localhost", ntohs(a.sin_port)}, 5s);
  while (events.connected == 0 && events.failure.empty()) uv_run(&loop, UV_RUN_ONCE);
  CHECK(events.connected == 1);
  while (!upstream.released()) uv_run(&loop, UV_RUN_ONCE);
  // Released once the socket closed: no resolve was pending to report, and the connect timer's
  // handle is its UvHandle's to free (it is not a part the owner waits for).
  CHECK(events.released_parts == 0);
  uv_close(reinterpret_cast<uv_handle_t*>(&server), nullptr);
  run_and_close(&loop);
}
