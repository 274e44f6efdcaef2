#include "proxy/net/tcp_stream.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "proxy/tls/tls_session.h"
#include "tests/unit/proxy/tls/test_pki.h"

using namespace kproxy;
using net::TcpStream;

namespace {

// Records what a stream reports; optionally echoes what it reads.
struct Recorder final : net::TcpStreamEvents {
  std::string read;
  std::vector<int> errors;
  std::vector<std::string> tls_failures;
  int tls_established = 0;
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
  void on_stream_tls_failed(TcpStream& s, const std::string& reason) override {
    tls_failures.push_back(reason);
    s.close();
  }
  void on_stream_tls_established(TcpStream&) override { ++tls_established; }
  void on_stream_writable(TcpStream&) override { ++writable; }
  void on_stream_closed(TcpStream&) override { ++closed; }
};

// Offers its own room for every read (as ClientConnection does for a large frame).
struct OwnRoom final : net::TcpStreamEvents {
  std::vector<uint8_t> room = std::vector<uint8_t>(1 << 20);
  size_t filled = 0;
  bool in_room = true;
  std::string got;
  void on_stream_read(TcpStream&, codec::Bytes data) override {
    in_room = in_room && data.data() == room.data() + filled;
    got.append(reinterpret_cast<const char*>(data.data()), data.size());
    if (in_room) filled += data.size();
  }
  void on_stream_error(TcpStream& s, int, const char*) override { s.close(); }
  void on_stream_writable(TcpStream&) override {}
  void on_stream_closed(TcpStream&) override {}
  std::span<uint8_t> read_space(TcpStream&) override { return std::span<uint8_t>(room).subspan(filled); }
};

struct Pair {
  uv_loop_t loop;
  uv_tcp_t server;
  Recorder server_events, client_events;
  std::unique_ptr<TcpStream> accepted, client;
  uv_connect_t connect_req;
  /// Called on each new stream before it reads or sends anything (TLS tests install sessions).
  std::function<void(TcpStream&)> setup_server, setup_client;
  /// Who the accepted stream reports to (default: server_events).
  net::TcpStreamEvents* server_owner;

  explicit Pair(std::function<void(TcpStream&)> server_setup = {}, std::function<void(TcpStream&)> client_setup = {},
                net::TcpStreamEvents* server_owner_in = nullptr)
      : setup_server(std::move(server_setup)), setup_client(std::move(client_setup)),
        server_owner(server_owner_in ? server_owner_in : &server_events) {
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
    if (setup_client) setup_client(*client);
    connect_req.data = this;
    uv_tcp_connect(&connect_req, client->handle(), reinterpret_cast<sockaddr*>(&addr), after_connect);
    while (!accepted || !client->connected()) uv_run(&loop, UV_RUN_ONCE);
  }
  static void on_connection(uv_stream_t* s, int) {
    auto* self = static_cast<Pair*>(s->data);
    self->accepted = std::make_unique<TcpStream>(&self->loop, *self->server_owner, "server");
    REQUIRE(uv_accept(s, self->accepted->stream()) == 0);
    if (self->setup_server) self->setup_server(*self->accepted);
    self->accepted->set_connected();
    self->accepted->start_reading();
  }
  static void after_connect(uv_connect_t* req, int status) {
    REQUIRE(status == 0);
    auto* self = static_cast<Pair*>(req->data);
    self->client->set_connected();
    self->client->flush();  // a TLS client's ClientHello
    self->client->start_reading();
  }
  void run_until(const std::function<bool()>& done) {
    for (int i = 0; i < 100000 && !done(); ++i) uv_run(&loop, UV_RUN_ONCE);
  }
};

/// Each stream is closed by its owner (its UvHandle: nobody else may close a stream's socket),
/// then the test's own listening socket; afterwards the loop has no handle left and closes.
void close_all_and_check(Pair& p) {
  for (auto* s : {p.client.get(), p.accepted.get()}) {
    if (s) s->close();
  }
  if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&p.server))) uv_close(reinterpret_cast<uv_handle_t*>(&p.server), nullptr);
  uv_run(&p.loop, UV_RUN_DEFAULT);
  int open_handles = 0;
  uv_walk(
      &p.loop, [](uv_handle_t*, void* n) { ++*static_cast<int*>(n); }, &open_handles);
  CHECK(open_handles == 0);
  CHECK(uv_loop_close(&p.loop) == 0);
}

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
  close_all_and_check(p);
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
  close_all_and_check(p);
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
  close_all_and_check(p);
}

namespace {

// TLS on both streams of a Pair: kproxy's code on both ends of a loopback socket.
struct TlsPair {
  testing::TestPki pki;
  std::shared_ptr<const tls::TlsContext> server_ctx, client_ctx;

  explicit TlsPair(const std::string& sans = "IP:127.0.0.1", long not_after_s = 3600) {
    auto id = pki.issue("server", sans, not_after_s < 0 ? not_after_s - 3600 : -60, not_after_s);
    config::ServerTlsConfig s;
    s.cert = config::TlsFile{id.cert, "cert", 0, 0};
    s.key = config::TlsFile{id.key, "key", 0, 0};
    config::UpstreamTlsConfig c;
    c.ca = config::TlsFile{pki.ca_file(), "ca", 0, 0};
    std::string error;
    server_ctx = tls::TlsContext::for_clients(s, "test", &error);
    client_ctx = tls::TlsContext::for_upstream(c, "test", &error);
    REQUIRE_MESSAGE((server_ctx && client_ctx), error);
  }
  std::function<void(TcpStream&)> server_setup() {
    return [this](TcpStream& s) { s.use_tls(std::make_unique<tls::TlsSession>(*server_ctx, "")); };
  }
  std::function<void(TcpStream&)> client_setup() {
    return [this](TcpStream& s) { s.use_tls(std::make_unique<tls::TlsSession>(*client_ctx, "127.0.0.1")); };
  }
};

}  // namespace

TEST_CASE("TLS streams: bytes flow both ways in order, large writes included, then close_notify reads as EOF") {
  TlsPair tls;
  Pair p(tls.server_setup(), tls.client_setup());
  p.server_events.echo_to = p.accepted.get();
  std::string sent;
  for (int i = 0; i < 200; ++i) {
    std::string chunk = "frame-" + std::to_string(i) + ";";
    sent += chunk;
    p.client->append(codec::Bytes(reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size()));
    if (i % 7 == 0) CHECK(p.client->flush());
  }
  std::string big(3 << 20, 'b');
  sent += big;
  p.client->append(codec::Bytes(reinterpret_cast<const uint8_t*>(big.data()), big.size()));
  CHECK(p.client->flush());
  p.run_until([&] { return p.client_events.read.size() >= sent.size(); });
  CHECK(p.server_events.read == sent);
  CHECK(p.client_events.read == sent);
  CHECK(p.client_events.tls_established == 1);
  CHECK(p.server_events.tls_established == 1);
  REQUIRE(p.client->tls() != nullptr);
  CHECK(p.client->tls()->established());
  p.accepted->shutdown_and_close();
  p.run_until([&] { return !p.client_events.errors.empty(); });
  REQUIRE(p.client_events.errors.size() == 1);
  CHECK(p.client_events.errors[0] == UV_EOF);
  CHECK(p.client_events.tls_failures.empty());
  close_all_and_check(p);
}

TEST_CASE("TLS streams: a certificate failure is reported with its reason on both sides") {
  TlsPair tls("DNS:wrong.example");
  Pair p(tls.server_setup(), tls.client_setup());
  p.run_until([&] { return !p.client_events.tls_failures.empty() && !p.server_events.tls_failures.empty(); });
  REQUIRE(p.client_events.tls_failures.size() == 1);
  CHECK(p.client_events.tls_failures[0].find("hostname mismatch: the broker's certificate (CN=server) is not valid for '127.0.0.1'") == 0);
  REQUIRE(p.server_events.tls_failures.size() == 1);
  CHECK_MESSAGE(p.server_events.tls_failures[0].find("the client rejected the handshake") == 0, p.server_events.tls_failures[0]);
  close_all_and_check(p);
}

TEST_CASE("TLS streams: plaintext bytes to a TLS server, and a close during the handshake") {
  TlsPair tls;
  SUBCASE("plaintext client") {
    Pair p(tls.server_setup());
    std::string request("\0\0\0\x0e\0\x12\0\x03\0\0\0\x01\0\0\0\0\0\0", 18);
    p.client->append(codec::Bytes(reinterpret_cast<const uint8_t*>(request.data()), request.size()));
    CHECK(p.client->flush());
    p.run_until([&] { return !p.server_events.tls_failures.empty(); });
    REQUIRE(p.server_events.tls_failures.size() == 1);
    CHECK(p.server_events.tls_failures[0].find("protocol mismatch: the client does not speak TLS (first byte 0x00") == 0);
    close_all_and_check(p);
  }
  SUBCASE("the server closes without answering the ClientHello") {
    Pair p({}, tls.client_setup());
    p.run_until([&] { return !p.server_events.read.empty(); });  // the ClientHello arrived
    CHECK(static_cast<uint8_t>(p.server_events.read[0]) == 0x16);
    p.accepted->shutdown_and_close();
    p.run_until([&] { return !p.client_events.tls_failures.empty() || !p.client_events.errors.empty(); });
    REQUIRE(p.client_events.tls_failures.size() == 1);
    CHECK(p.client_events.tls_failures[0].find("the broker closed the connection during the TLS handshake") == 0);
    close_all_and_check(p);
  }
}

TEST_CASE("borrowed bytes are written or copied by flush(): the caller may reuse them afterwards") {
  // Given a peer that does not read, so the kernel takes only part of a large borrowed write
  Pair p;
  p.accepted->stop_reading();
  std::vector<uint8_t> source(8 << 20);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 13);
  std::string expected(reinterpret_cast<const char*>(source.data()), source.size());
  p.client->append_borrowed(codec::Bytes(source.data(), source.size() / 2));
  p.client->append_borrowed(codec::Bytes(source.data() + source.size() / 2, source.size() / 2));  // adjacent: merged
  CHECK(p.client->holds_borrowed());
  CHECK(p.client->queued_bytes() == source.size());
  // When it is flushed and the caller then overwrites its bytes
  CHECK(p.client->flush());
  CHECK_FALSE(p.client->holds_borrowed());
  CHECK(p.client->above_high_water());  // backpressure still triggers on the rest
  std::fill(source.begin(), source.end(), 0);
  // Then the peer still receives the original bytes
  p.accepted->start_reading();
  p.run_until([&] { return p.server_events.read.size() >= expected.size(); });
  CHECK(p.server_events.read == expected);
  CHECK(p.client_events.writable == 1);
  CHECK(p.client->queued_bytes() == 0);
  close_all_and_check(p);
}

TEST_CASE("copies, moved buffers and borrowed views leave in the order they were queued") {
  Pair p;
  std::string expected;
  auto text = [](const std::string& s) { return codec::Bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  std::string a = "copied-1;", b = "borrowed-2;", c = "copied-3;";
  for (int round = 0; round < 50; ++round) {
    p.client->append(text(a));
    p.client->append_borrowed(text(b));
    codec::FrameBuffer moved;
    std::string m = "moved-" + std::to_string(round) + ";";
    moved.append(text(m));
    p.client->append(std::move(moved));
    p.client->append(text(c));
    expected += a + b + m + c;
    CHECK(p.client->flush());
    CHECK_FALSE(p.client->holds_borrowed());
  }
  p.run_until([&] { return p.server_events.read.size() >= expected.size(); });
  CHECK(p.server_events.read == expected);
  close_all_and_check(p);
}

TEST_CASE("a moved-in buffer is written from where it is, and is owned by the stream until written") {
  // Given a peer that does not read and a 16 MiB buffer moved into the queue (more than the
  // kernel's socket buffers take)
  Pair p;
  p.accepted->stop_reading();
  codec::FrameBuffer big;
  std::vector<uint8_t> pattern(16 << 20);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 5 + 1);
  big.append(pattern);
  p.client->append(std::move(big));
  CHECK(big.empty());  // NOLINT(bugprone-use-after-move): the stream has it now
  CHECK(p.client->queued_bytes() == pattern.size());
  CHECK(p.client->flush());
  CHECK(p.client->above_high_water());
  // When the peer reads, it gets every byte, and the queue empties
  p.accepted->start_reading();
  p.run_until([&] { return p.server_events.read.size() >= pattern.size(); });
  CHECK(p.server_events.read == std::string(reinterpret_cast<const char*>(pattern.data()), pattern.size()));
  CHECK(p.client->queued_bytes() == 0);
  CHECK(p.client_events.writable == 1);
  close_all_and_check(p);
}

TEST_CASE("a stream not yet connected copies what it borrowed and sends it once connected") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    Recorder events;
    TcpStream s(&loop, events, "upstream");
    std::string bytes = "early request";
    s.append_borrowed(codec::Bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    CHECK(s.flush());
    CHECK_FALSE(s.holds_borrowed());
    CHECK(s.queued_bytes() == bytes.size());
    s.close();
    CHECK(s.queued_bytes() == 0);  // closing drops the queue
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(events.closed == 1);
  }
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("reads go into the room the owner offers") {
  // Given a server-side stream whose owner offers a 1 MiB room of its own for every read
  OwnRoom own;
  Pair p({}, {}, &own);
  std::vector<uint8_t> data(300000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 3);
  // When 300,000 bytes arrive
  p.client->append(data);
  CHECK(p.client->flush());
  p.run_until([&] { return own.filled >= data.size(); });
  // Then every read landed at the end of the room, back to back, and the room holds the bytes
  CHECK(own.filled == data.size());
  CHECK(own.in_room);
  CHECK(own.got.size() == data.size());
  CHECK(std::equal(data.begin(), data.end(), own.room.begin()));
  close_all_and_check(p);
}

TEST_CASE("TLS streams: borrowed views and moved buffers are encrypted in order, and reads skip read_space") {
  // Given a TLS pair whose server owner would offer room of its own (it must not be used: the
  // socket carries ciphertext)
  TlsPair tls;
  OwnRoom own;
  Pair q(tls.server_setup(), tls.client_setup(), &own);
  std::string expected;
  auto text = [](const std::string& s) { return codec::Bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  for (int round = 0; round < 20; ++round) {
    std::string b = "borrowed-" + std::to_string(round) + ";";
    q.client->append_borrowed(text(b));
    codec::FrameBuffer moved;
    std::string m(100000 + round, static_cast<char>('a' + round));
    moved.append(text(m));
    q.client->append(std::move(moved));
    expected += b + m;
    CHECK(q.client->flush());
    CHECK_FALSE(q.client->holds_borrowed());
    b.assign(b.size(), 'x');  // the caller reuses its bytes after flush()
  }
  q.run_until([&] { return own.got.size() >= expected.size(); });
  // Then the plaintext arrives intact, in order, as decrypted pieces (not read into the room)
  CHECK(own.got == expected);
  CHECK_FALSE(own.in_room);
  close_all_and_check(q);
}
