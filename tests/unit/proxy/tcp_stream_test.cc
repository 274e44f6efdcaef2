#include "proxy/tcp_stream.h"

#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace kproxy;
using proxy::TcpStream;

namespace {

// Records what a stream reports; optionally echoes what it reads.
struct Recorder final : proxy::TcpStreamEvents {
  std::string read;
  std::vector<int> errors;
  int writable = 0;
  int closed = 0;
  TcpStream* echo_to = nullptr;
  void on_stream_read(TcpStream&, codec::Bytes data) override {
    read.append(reinterpret_cast<const char*>(data.data()), data.size());
    if (echo_to) {
      echo_to->append(data);
      echo_to->flush();
    }
  }
  void on_stream_error(TcpStream& s, int status, const char*) override {
    errors.push_back(status);
    s.close();
  }
  void on_stream_writable(TcpStream&) override { ++writable; }
  void on_stream_closed(TcpStream&) override { ++closed; }
};

void close_all_and_check(uv_loop_t* loop) {
  uv_walk(loop, [](uv_handle_t* h, void*) { if (!uv_is_closing(h)) uv_close(h, nullptr); }, nullptr);
  uv_run(loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(loop) == 0);
}

struct Pair {
  uv_loop_t loop;
  uv_tcp_t server;
  Recorder server_events, client_events;
  std::unique_ptr<TcpStream> accepted, client;
  uv_connect_t connect_req;

  Pair() {
    uv_loop_init(&loop);
    uv_tcp_init(&loop, &server);
    server.data = this;
    sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", 0, &addr);
    REQUIRE(uv_tcp_bind(&server, reinterpret_cast<sockaddr*>(&addr), 0) == 0);
    REQUIRE(uv_listen(reinterpret_cast<uv_stream_t*>(&server), 8, on_connection) == 0);
    int len = sizeof(addr);
    uv_tcp_getsockname(&server, reinterpret_cast<sockaddr*>(&addr), &len);
    client = std::make_unique<TcpStream>(&loop, client_events, "client");
    connect_req.data = this;
    uv_tcp_connect(&connect_req, client->handle(), reinterpret_cast<sockaddr*>(&addr), after_connect);
    while (!accepted || !client->connected()) uv_run(&loop, UV_RUN_ONCE);
  }
  static void on_connection(uv_stream_t* s, int) {
    auto* self = static_cast<Pair*>(s->data);
    self->accepted = std::make_unique<TcpStream>(&self->loop, self->server_events, "server");
    REQUIRE(uv_accept(s, self->accepted->stream()) == 0);
    self->accepted->set_connected();
    self->accepted->start_reading();
  }
  static void after_connect(uv_connect_t* req, int status) {
    REQUIRE(status == 0);
    auto* self = static_cast<Pair*>(req->data);
    self->client->set_connected();
    self->client->start_reading();
  }
  void run_until(const std::function<bool()>& done) {
    for (int i = 0; i < 100000 && !done(); ++i) uv_run(&loop, UV_RUN_ONCE);
  }
};

}  // namespace

TEST_CASE("bytes flow both ways, in order, and the loop closes cleanly") {
  Pair p;
  p.server_events.echo_to = p.accepted.get();
  std::string sent;
  for (int i = 0; i < 200; ++i) {
    std::string chunk = "frame-" + std::to_string(i) + ";";
    sent += chunk;
    p.client->append(codec::Bytes(reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size()));
    if (i % 7 == 0) CHECK(p.client->flush());
  }
  CHECK(p.client->flush());
  p.run_until([&] { return p.client_events.read.size() >= sent.size(); });
  CHECK(p.server_events.read == sent);
  CHECK(p.client_events.read == sent);
  CHECK(p.client->peer_address().rfind("127.0.0.1:", 0) == 0);
  close_all_and_check(&p.loop);
}

TEST_CASE("a large write goes above the high-water mark and reports writable once drained") {
  Pair p;
  p.accepted->stop_reading();  // nobody reads: the kernel buffers fill up
  std::vector<uint8_t> big(8 << 20, 0x5a);
  p.client->append(big);
  CHECK(p.client->flush());
  CHECK(p.client->above_high_water());
  p.accepted->start_reading();
  p.run_until([&] { return p.server_events.read.size() >= big.size(); });
  CHECK(p.server_events.read.size() == big.size());
  CHECK(p.client_events.writable == 1);
  CHECK(p.client->queued_bytes() == 0);
  close_all_and_check(&p.loop);
}

TEST_CASE("shutdown_and_close delivers queued bytes, then the peer sees EOF") {
  Pair p;
  std::string last = "last words";
  p.accepted->append(codec::Bytes(reinterpret_cast<const uint8_t*>(last.data()), last.size()));
  p.accepted->shutdown_and_close();
  p.run_until([&] { return !p.client_events.errors.empty(); });
  CHECK(p.client_events.read == last);
  REQUIRE(p.client_events.errors.size() == 1);
  CHECK(p.client_events.errors[0] == UV_EOF);
  CHECK(p.server_events.closed == 1);
  close_all_and_check(&p.loop);
}
