#include "proxy/tls/tls_session.h"

#include <doctest/doctest.h>

#include <malloc.h>

#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define KPROXY_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KPROXY_TEST_ASAN 1
#endif
#endif
#if defined(KPROXY_TEST_ASAN)
// The sanitizer runtime's heap counter (declared here: GCC's packages ship no header for it).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

#include "tests/unit/proxy/tls/test_pki.h"
#include "tests/unit/support/text.h"

using namespace kproxy;
using tls::TlsContext;
using tls::TlsFailure;
using tls::TlsSession;

namespace {

using kproxy::testing::bytes_of;

// Bytes in use on the heap now (the sanitizer's allocator under ASan, glibc's otherwise).
size_t live_heap_bytes() {
#if defined(KPROXY_TEST_ASAN)
  return __sanitizer_get_current_allocated_bytes();
#else
  return mallinfo2().uordblks;
#endif
}

config::TlsFile file(const std::string& path, const char* key) { return config::TlsFile{path, key, 1, 1}; }

std::shared_ptr<const TlsContext> server_context(const kproxy::testing::TestPki::Identity& id, const std::string& client_ca = "",
                                                 config::ClientAuth auth = config::ClientAuth::kNone) {
  config::ServerTlsConfig c;
  c.cert = file(id.cert, "tls.cert");
  c.key = file(id.key, "tls.key");
  if (!client_ca.empty()) c.client_ca = file(client_ca, "tls.client_ca");
  c.client_auth = auth;
  std::string error;
  auto ctx = TlsContext::for_clients(c, "test.yaml", &error);
  REQUIRE_MESSAGE(ctx, error);
  return ctx;
}

std::shared_ptr<const TlsContext> client_context(const std::string& ca, const kproxy::testing::TestPki::Identity* id = nullptr,
                                                 config::TlsVersion min = config::TlsVersion::kTls12) {
  config::UpstreamTlsConfig c;
  c.ca = file(ca, "upstream_tls.ca");
  if (id) {
    c.cert = file(id->cert, "upstream_tls.cert");
    c.key = file(id->key, "upstream_tls.key");
  }
  c.min_version = min;
  std::string error;
  auto ctx = TlsContext::for_upstream(c, "test.yaml", &error);
  REQUIRE_MESSAGE(ctx, error);
  return ctx;
}

// Two sessions wired back to back through their BIOs, as two sockets would be.
struct Wire {
  TlsSession client;
  TlsSession server;
  std::string client_got, server_got;
  TlsSession::Status client_status = TlsSession::Status::kOk;
  TlsSession::Status server_status = TlsSession::Status::kOk;

  Wire(const TlsContext& client_ctx, const TlsContext& server_ctx, const std::string& host)
      : client(client_ctx, host), server(server_ctx, "") {
    client_status = client.start();
  }

  // Moves ciphertext both ways until neither side has anything to send.
  void pump() {
    for (int round = 0; round < 50; ++round) {
      bool moved = false;
      std::vector<uint8_t> to_server, to_client;
      client.take_output([&](codec::Bytes b) { to_server.assign(b.begin(), b.end()); });
      if (!to_server.empty() && server_status == TlsSession::Status::kOk) {
        moved = true;
        server_status = server.receive(to_server, [&](codec::Bytes b) {
          server_got.append(reinterpret_cast<const char*>(b.data()), b.size());
          return true;
        });
      }
      server.take_output([&](codec::Bytes b) { to_client.assign(b.begin(), b.end()); });
      if (!to_client.empty() && client_status == TlsSession::Status::kOk) {
        moved = true;
        client_status = client.receive(to_client, [&](codec::Bytes b) {
          client_got.append(reinterpret_cast<const char*>(b.data()), b.size());
          return true;
        });
      }
      if (!moved) return;
    }
  }
};

// `n` bytes of the letters from `first`, `period` of them over and over: a payload whose order shows.
std::string pattern(size_t n, char first, int period) {
  std::string out(n, ' ');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(first + static_cast<int>(i % static_cast<size_t>(period)));
  return out;
}

// A client and a server session over a test PKI, handshaken.
struct EstablishedWire {
  kproxy::testing::TestPki pki;
  std::shared_ptr<const TlsContext> server_ctx = server_context(pki.issue("broker", "DNS:localhost,IP:127.0.0.1"));
  std::shared_ptr<const TlsContext> client_ctx = client_context(pki.ca_file());
  Wire w{*client_ctx, *server_ctx, "localhost"};

  EstablishedWire() {
    w.pump();
    REQUIRE(w.client.established());
  }
};

}  // namespace

TEST_CASE("two sessions handshake through memory BIOs and carry bytes both ways") {
  kproxy::testing::TestPki pki;
  auto server_id = pki.issue("broker", "DNS:localhost,IP:127.0.0.1");
  auto server_ctx = server_context(server_id);
  auto client_ctx = client_context(pki.ca_file());
  Wire w(*client_ctx, *server_ctx, "localhost");
  // Sent before the handshake: held, then encrypted once it completes.
  CHECK(w.client.send(bytes_of("early request")) == TlsSession::Status::kOk);
  CHECK(w.client.held_plaintext() == 13);
  w.pump();
  REQUIRE(w.client.established());
  REQUIRE(w.server.established());
  CHECK(w.client.take_just_established());
  CHECK_FALSE(w.client.take_just_established());
  CHECK(w.client.protocol_and_cipher().rfind("TLSv1.3 ", 0) == 0);
  CHECK(w.server.requested_server_name() == "localhost");  // SNI = the host connected to
  CHECK(w.client.requested_server_name() == "localhost");
  CHECK(w.client.encrypt() == TlsSession::Status::kOk);
  w.pump();
  CHECK(w.server_got == "early request");

  // A large write (encrypted at once, many records) and small batched ones keep their order.
  std::string big = pattern(1 << 20, 'a', 26);
  CHECK(w.server.send(bytes_of("small-1;")) == TlsSession::Status::kOk);
  CHECK(w.server.send(bytes_of(big)) == TlsSession::Status::kOk);
  CHECK(w.server.send(bytes_of(";small-2")) == TlsSession::Status::kOk);
  CHECK(w.server.encrypt() == TlsSession::Status::kOk);
  CHECK(w.server.held_plaintext() == 0);
  CHECK(w.server.output_size() > big.size());
  w.pump();
  CHECK(w.client_got == "small-1;" + big + ";small-2");

  // close_notify reads as the peer closing.
  w.client.close_notify();
  w.pump();
  CHECK(w.server_status == TlsSession::Status::kPeerClosed);
}

TEST_CASE("TLS 1.2 works when the server allows no more") {
  kproxy::testing::TestPki pki;
  auto server_ctx = server_context(pki.issue("broker", "IP:127.0.0.1"));
  SSL_CTX_set_max_proto_version(server_ctx->native(), TLS1_2_VERSION);
  auto client_ctx = client_context(pki.ca_file());
  Wire w(*client_ctx, *server_ctx, "127.0.0.1");
  w.pump();
  REQUIRE(w.client.established());
  CHECK(w.client.protocol_and_cipher().rfind("TLSv1.2 ", 0) == 0);
  CHECK(w.server.requested_server_name() == "");  // no SNI for an IP address (RFC 6066 section 3)
}

TEST_CASE("a broker certificate from an unknown CA is refused with 'unknown CA'") {
  kproxy::testing::TestPki pki;
  auto server_ctx = server_context(pki.issue("broker", "DNS:localhost", -60, 3600, /*by_unrelated_ca=*/true));
  auto client_ctx = client_context(pki.ca_file());
  Wire w(*client_ctx, *server_ctx, "localhost");
  w.pump();
  CHECK(w.client_status == TlsSession::Status::kFailed);
  CHECK(w.client.failure().kind == TlsFailure::Kind::kUnknownCa);
  CHECK_MESSAGE(w.client.failure().message.find("unknown CA: the broker's certificate (CN=broker) is not signed by a trusted CA") == 0,
                w.client.failure().message);
  // The client's alert reaches the server, which sees itself rejected.
  CHECK(w.server_status == TlsSession::Status::kFailed);
  CHECK(w.server.failure().kind == TlsFailure::Kind::kRejectedByPeer);
  CHECK_MESSAGE(w.server.failure().message.find("unknown ca") != std::string::npos, w.server.failure().message);
}

TEST_CASE("a certificate for another host is refused with 'hostname mismatch'") {
  kproxy::testing::TestPki pki;
  auto server_ctx = server_context(pki.issue("broker", "DNS:wrong.example"));
  auto client_ctx = client_context(pki.ca_file());
  SUBCASE("a DNS name") {
    Wire w(*client_ctx, *server_ctx, "localhost");
    w.pump();
    CHECK(w.client.failure().kind == TlsFailure::Kind::kHostnameMismatch);
    CHECK_MESSAGE(
        w.client.failure().message.find("hostname mismatch: the broker's certificate (CN=broker) is not valid for 'localhost'") == 0,
        w.client.failure().message);
  }
  SUBCASE("an IP address") {
    Wire w(*client_ctx, *server_ctx, "127.0.0.1");
    w.pump();
    CHECK(w.client.failure().kind == TlsFailure::Kind::kHostnameMismatch);
    CHECK(w.client.failure().message.find("not valid for '127.0.0.1'") != std::string::npos);
  }
}

TEST_CASE("hostname verification can be turned off, the CA check stays") {
  kproxy::testing::TestPki pki;
  auto server_ctx = server_context(pki.issue("broker", "DNS:wrong.example"));
  config::UpstreamTlsConfig c;
  c.ca = file(pki.ca_file(), "ca");
  c.verify_hostname = false;
  std::string error;
  auto client_ctx = TlsContext::for_upstream(c, "test.yaml", &error);
  REQUIRE(client_ctx);
  Wire w(*client_ctx, *server_ctx, "localhost");
  w.pump();
  CHECK(w.client.established());
}

TEST_CASE("an expired certificate is refused with 'certificate expired' and its end date") {
  kproxy::testing::TestPki pki;
  auto server_ctx = server_context(pki.issue("broker", "DNS:localhost", -7200, -3600));
  auto client_ctx = client_context(pki.ca_file());
  Wire w(*client_ctx, *server_ctx, "localhost");
  w.pump();
  CHECK(w.client.failure().kind == TlsFailure::Kind::kCertificateExpired);
  CHECK_MESSAGE(w.client.failure().message.find("certificate expired: the broker's certificate (CN=broker) expired on ") == 0,
                w.client.failure().message);
  CHECK(w.client.failure().message.find("GMT") != std::string::npos);
}

TEST_CASE("a plaintext Kafka request on a TLS server session is a protocol mismatch") {
  kproxy::testing::TestPki pki;
  auto server_ctx = server_context(pki.issue("kproxy", "DNS:localhost"));
  TlsSession server(*server_ctx, "");
  const uint8_t api_versions_request[] = {0x00, 0x00, 0x00, 0x0e, 0x00, 0x12, 0x00, 0x03, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
  auto status = server.receive(codec::Bytes(api_versions_request, sizeof(api_versions_request)), [](codec::Bytes) { return true; });
  CHECK(status == TlsSession::Status::kFailed);
  CHECK(server.failure().kind == TlsFailure::Kind::kNotTls);
  CHECK(server.failure().message.find("the client does not speak TLS (first byte 0x00") != std::string::npos);
}

TEST_CASE("a plaintext answer to a client session is a protocol mismatch") {
  kproxy::testing::TestPki pki;
  auto client_ctx = client_context(pki.ca_file());
  TlsSession client(*client_ctx, "localhost");
  client.start();
  CHECK(client.output_size() > 0);  // the ClientHello
  const uint8_t kafka_response[] = {0x00, 0x00, 0x00, 0x0a, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
  auto status = client.receive(codec::Bytes(kafka_response, sizeof(kafka_response)), [](codec::Bytes) { return true; });
  CHECK(status == TlsSession::Status::kFailed);
  CHECK(client.failure().kind == TlsFailure::Kind::kNotTls);
  CHECK_MESSAGE(client.failure().message.find("protocol mismatch: the broker does not speak TLS") == 0, client.failure().message);
}

TEST_CASE("mutual TLS: a client certificate is required, checked, and accepted") {
  kproxy::testing::TestPki pki;
  auto server_ctx = server_context(pki.issue("kproxy", "DNS:localhost"), pki.ca_file(), config::ClientAuth::kRequired);
  SUBCASE("without a certificate the server refuses") {
    auto client_ctx = client_context(pki.ca_file());
    Wire w(*client_ctx, *server_ctx, "localhost");
    w.pump();
    CHECK(w.server.failure().kind == TlsFailure::Kind::kNoPeerCertificate);
    CHECK(w.server.failure().message == "no certificate: the client sent none and one is required");
  }
  SUBCASE("a certificate from an unrelated CA is refused as unknown CA") {
    auto id = pki.issue("app", "DNS:app", -60, 3600, /*by_unrelated_ca=*/true);
    auto client_ctx = client_context(pki.ca_file(), &id);
    Wire w(*client_ctx, *server_ctx, "localhost");
    w.pump();
    CHECK(w.server.failure().kind == TlsFailure::Kind::kUnknownCa);
    CHECK(w.server.failure().message.find("the client's certificate (CN=app)") != std::string::npos);
  }
  SUBCASE("a certificate from the CA is accepted") {
    auto id = pki.issue("app", "DNS:app");
    auto client_ctx = client_context(pki.ca_file(), &id);
    Wire w(*client_ctx, *server_ctx, "localhost");
    w.client.send(bytes_of("hello"));
    w.pump();
    CHECK(w.server.established());
    CHECK(w.server_got == "hello");
  }
}

TEST_CASE("no TLS version in common is a version mismatch") {
  kproxy::testing::TestPki pki;
  auto server_ctx = server_context(pki.issue("broker", "DNS:localhost"));
  SSL_CTX_set_max_proto_version(server_ctx->native(), TLS1_2_VERSION);
  auto client_ctx = client_context(pki.ca_file(), nullptr, config::TlsVersion::kTls13);
  Wire w(*client_ctx, *server_ctx, "localhost");
  w.pump();
  CHECK(w.server.failure().kind == TlsFailure::Kind::kVersionMismatch);
  CHECK(w.client.failure().kind == TlsFailure::Kind::kVersionMismatch);
}

TEST_CASE("ciphertext cut anywhere, down to single bytes, decrypts to the same bytes (a partial record waits in the session)") {
  kproxy::testing::TestPki pki;
  auto server_id = pki.issue("broker", "DNS:localhost,IP:127.0.0.1");
  auto server_ctx = server_context(server_id);
  auto client_ctx = client_context(pki.ca_file());
  for (size_t piece : {size_t{1}, size_t{7}, size_t{5000}, size_t{16384 + 21}, size_t{100000}}) {
    CAPTURE(piece);
    TlsSession client(*client_ctx, "localhost");
    TlsSession server(*server_ctx, "");
    REQUIRE(client.start() == TlsSession::Status::kOk);
    std::string server_got;
    // Given every flight delivered in pieces of `piece` bytes, handshake included
    auto deliver = [&](TlsSession& from, TlsSession& to, std::string* got) {
      std::vector<uint8_t> wire;
      from.take_output([&](codec::Bytes b) { wire.assign(b.begin(), b.end()); });
      for (size_t at = 0; at < wire.size(); at += piece) {
        codec::Bytes part(wire.data() + at, std::min(piece, wire.size() - at));
        REQUIRE(to.receive(part, [&](codec::Bytes b) {
          if (got) got->append(reinterpret_cast<const char*>(b.data()), b.size());
          return true;
        }) == TlsSession::Status::kOk);
      }
      return !wire.empty();
    };
    for (int round = 0; round < 20 && (deliver(client, server, &server_got) | deliver(server, client, nullptr)); ++round) {
    }
    REQUIRE(client.established());
    REQUIRE(server.established());
    // When 200,000 bytes (13 records) cross in those pieces
    std::string big = pattern(200000, 'A', 23);
    REQUIRE(client.send(bytes_of(big)) == TlsSession::Status::kOk);
    REQUIRE(client.encrypt() == TlsSession::Status::kOk);
    deliver(client, server, &server_got);
    // Then the server got exactly them, and holds no ciphertext of its own afterwards
    CHECK(server_got == big);
    CHECK(server.output_size() == 0);
  }
}

TEST_CASE("an idle session gives back its buffers and OpenSSL's record buffers, and carries bytes after") {
  kproxy::testing::TestPki pki;
  auto server_id = pki.issue("broker", "DNS:localhost,IP:127.0.0.1");
  auto server_ctx = server_context(server_id);
  auto client_ctx = client_context(pki.ca_file());
  Wire w(*client_ctx, *server_ctx, "localhost");
  w.pump();
  REQUIRE(w.client.established());
  // The server's TLS 1.3 NewSessionTickets reached the client right after the handshake (post-
  // handshake messages): OpenSSL set up both record buffers to read them and kept the write
  // buffer, never written through since. The release gives it back.
  size_t before = live_heap_bytes();
  w.client.release_idle_memory();
  size_t after = live_heap_bytes();
  INFO("client released " << (before - after) << " bytes");
  CHECK(before > after);
  CHECK(before - after >= (16u << 10));

  // A request and its answer, as the ApiVersions round trip of an idle connection: the session's
  // own vectors grow, and go when idle.
  REQUIRE(w.client.send(bytes_of("request")) == TlsSession::Status::kOk);
  REQUIRE(w.client.encrypt() == TlsSession::Status::kOk);
  w.pump();
  REQUIRE(w.server_got == "request");
  REQUIRE(w.server.send(bytes_of("answer")) == TlsSession::Status::kOk);
  REQUIRE(w.server.encrypt() == TlsSession::Status::kOk);
  w.pump();
  REQUIRE(w.client_got == "answer");
  CHECK(w.client.buffer_capacity() > 0);
  w.client.release_idle_memory();
  CHECK(w.client.buffer_capacity() == 0);
  // Once more: nothing left to give back.
  before = live_heap_bytes();
  w.client.release_idle_memory();
  CHECK(live_heap_bytes() == before);
  w.server.release_idle_memory();
  CHECK(w.server.buffer_capacity() == 0);

  // Both keep working: the buffers come back when bytes move.
  REQUIRE(w.client.send(bytes_of("again")) == TlsSession::Status::kOk);
  REQUIRE(w.client.encrypt() == TlsSession::Status::kOk);
  w.pump();
  CHECK(w.server_got == "requestagain");
  REQUIRE(w.server.send(bytes_of("+")) == TlsSession::Status::kOk);
  REQUIRE(w.server.encrypt() == TlsSession::Status::kOk);
  w.pump();
  CHECK(w.client_got == "answer+");
}

TEST_CASE("plaintext is decrypted straight into the room the owner offers, the rest into the session's own buffer") {
  EstablishedWire pair;
  Wire& w = pair.w;
  std::string big = pattern(300000, 'a', 19);
  REQUIRE(w.client.send(bytes_of(big)) == TlsSession::Status::kOk);
  std::vector<uint8_t> wire;
  w.client.take_output([&](codec::Bytes b) { wire.assign(b.begin(), b.end()); });

  // The owner offers 100,000 bytes of room once (a frame's missing rest), then none.
  std::vector<uint8_t> room(100000);
  bool offered = false;
  size_t in_room = 0;
  std::string got;
  auto status = w.server.receive(
      wire,
      [&](codec::Bytes b) {
        if (b.data() == room.data()) in_room += b.size();  // a view of the room: nothing copied
        got.append(reinterpret_cast<const char*>(b.data()), b.size());
        return true;
      },
      [&]() -> std::span<uint8_t> {
        if (offered) return {};
        offered = true;
        return std::span<uint8_t>(room);
      });
  CHECK(status == TlsSession::Status::kOk);
  CHECK(in_room == room.size());
  CHECK(std::string(room.begin(), room.end()) == big.substr(0, room.size()));
  CHECK(got == big);
}

TEST_CASE("with an output target, ciphertext is appended to it in order and the session keeps none") {
  EstablishedWire pair;
  Wire& w = pair.w;
  std::string big = pattern(200000, 'a', 23);

  // Something already waiting in the session (a small write encrypted without a target) goes
  // out first: taken before the target is set, as TcpStream does.
  REQUIRE(w.client.send(bytes_of("first;")) == TlsSession::Status::kOk);
  REQUIRE(w.client.encrypt() == TlsSession::Status::kOk);
  codec::FrameBuffer queue;
  w.client.take_output([&](codec::Bytes b) { queue.append(b); });
  size_t before = queue.size();
  REQUIRE(before > 6);

  w.client.set_output_target(&queue);
  CHECK(w.client.send(bytes_of(big)) == TlsSession::Status::kOk);  // encrypted at once, into the queue
  CHECK(w.client.send(bytes_of(";last")) == TlsSession::Status::kOk);
  CHECK(w.client.encrypt() == TlsSession::Status::kOk);
  w.client.set_output_target(nullptr);
  CHECK(w.client.output_size() == 0);
  CHECK(queue.size() > before + big.size());

  std::string got;
  auto status = w.server.receive(queue.bytes(), [&](codec::Bytes b) {
    got.append(reinterpret_cast<const char*>(b.data()), b.size());
    return true;
  });
  CHECK(status == TlsSession::Status::kOk);
  CHECK(got == "first;" + big + ";last");
}
