#include "proxy/tls/tls_context.h"

#include <doctest/doctest.h>

#include <string>

#include "tests/unit/proxy/tls/test_pki.h"

using namespace kproxy;
using tls::TlsContext;

namespace {
config::TlsFile file(const std::string& path, const char* key, int line) { return config::TlsFile{path, key, line, 7}; }
}  // namespace

TEST_CASE("an upstream context with a CA and a client certificate") {
  testing::TestPki pki;
  auto id = pki.issue("kproxy", "DNS:kproxy");
  config::UpstreamTlsConfig c;
  c.ca = file(pki.ca_file(), "listeners[0].upstream_tls.ca", 3);
  c.cert = file(id.cert, "listeners[0].upstream_tls.cert", 4);
  c.key = file(id.key, "listeners[0].upstream_tls.key", 5);
  std::string error;
  auto ctx = TlsContext::for_upstream(c, "kproxy.yaml", &error);
  REQUIRE_MESSAGE(ctx, error);
  CHECK(ctx->role() == TlsContext::Role::kClient);
  CHECK(ctx->verify_hostname());
  CHECK(ctx->summary() == "TLS 1.2+, CA " + pki.ca_file() + ", client certificate " + id.cert + ", hostname verified");
  CHECK(SSL_CTX_get_min_proto_version(ctx->native()) == TLS1_2_VERSION);
}

TEST_CASE("without a CA file the system trust store is used; min_version 1.3 is applied") {
  config::UpstreamTlsConfig c;
  c.min_version = config::TlsVersion::kTls13;
  std::string error;
  auto ctx = TlsContext::for_upstream(c, "kproxy.yaml", &error);
  REQUIRE_MESSAGE(ctx, error);
  CHECK(ctx->summary() == "TLS 1.3, system CAs, hostname verified");
  CHECK(SSL_CTX_get_min_proto_version(ctx->native()) == TLS1_3_VERSION);
}

TEST_CASE("file errors name the config position, the key and the file") {
  testing::TestPki pki;
  auto id = pki.issue("kproxy", "DNS:kproxy");
  auto other = pki.issue("other", "DNS:other");
  std::string error;
  SUBCASE("a missing file") {
    config::ServerTlsConfig c;
    c.cert = file(pki.path("nope.pem"), "listeners[0].tls.cert", 9);
    c.key = file(id.key, "listeners[0].tls.key", 10);
    CHECK_FALSE(TlsContext::for_clients(c, "kproxy.yaml", &error));
    CHECK(error == "kproxy.yaml:9:7: listeners[0].tls.cert: cannot load '" + pki.path("nope.pem") + "': No such file or directory");
  }
  SUBCASE("a file that is not PEM") {
    config::ServerTlsConfig c;
    c.cert = file(pki.write_text("garbage.pem", "not a certificate\n"), "listeners[0].tls.cert", 9);
    c.key = file(id.key, "listeners[0].tls.key", 10);
    CHECK_FALSE(TlsContext::for_clients(c, "kproxy.yaml", &error));
    CHECK(error.find("kproxy.yaml:9:7: listeners[0].tls.cert: cannot load '") == 0);
    CHECK(error.find("not a PEM certificate chain") != std::string::npos);
  }
  SUBCASE("a key of another certificate") {
    config::ServerTlsConfig c;
    c.cert = file(id.cert, "listeners[0].tls.cert", 9);
    c.key = file(other.key, "listeners[0].tls.key", 10);
    CHECK_FALSE(TlsContext::for_clients(c, "kproxy.yaml", &error));
    CHECK(error.find("kproxy.yaml:10:7: listeners[0].tls.key: cannot load '" + other.key +
                     "': the key does not belong to the certificate") == 0);
  }
  SUBCASE("a CA bundle without certificates") {
    config::UpstreamTlsConfig c;
    c.ca = file(pki.write_text("empty.pem", ""), "listeners[1].upstream_tls.ca", 12);
    CHECK_FALSE(TlsContext::for_upstream(c, "kproxy.yaml", &error));
    CHECK(error.find("kproxy.yaml:12:7: listeners[1].upstream_tls.ca: cannot load '") == 0);
    CHECK(error.find("no PEM CA certificate in it") != std::string::npos);
  }
}

TEST_CASE("a server context asking for client certificates") {
  testing::TestPki pki;
  auto id = pki.issue("kproxy", "DNS:kproxy");
  config::ServerTlsConfig c;
  c.cert = file(id.cert, "cert", 1);
  c.key = file(id.key, "key", 2);
  c.client_ca = file(pki.ca_file(), "client_ca", 3);
  c.client_auth = config::ClientAuth::kRequired;
  std::string error;
  auto ctx = TlsContext::for_clients(c, "kproxy.yaml", &error);
  REQUIRE_MESSAGE(ctx, error);
  CHECK(ctx->role() == TlsContext::Role::kServer);
  CHECK(SSL_CTX_get_verify_mode(ctx->native()) == (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT));
  CHECK(ctx->summary().find("client certificates required") != std::string::npos);
}

namespace {

/// The CN of the certificate a server built on `server_ctx` presents to a client asking for
/// `server_name`: a real handshake over a BIO pair.
std::string presented_cn(SSL_CTX* server_ctx, const char* server_name) {
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  SSL* client = SSL_new(client_ctx);
  SSL* server = SSL_new(server_ctx);
  BIO *client_bio = nullptr, *server_bio = nullptr;
  REQUIRE(BIO_new_bio_pair(&client_bio, 0, &server_bio, 0) == 1);
  SSL_set_bio(client, client_bio, client_bio);
  SSL_set_bio(server, server_bio, server_bio);
  if (server_name) SSL_set_tlsext_host_name(client, server_name);
  SSL_set_connect_state(client);
  SSL_set_accept_state(server);
  for (int i = 0; i < 20 && (!SSL_is_init_finished(client) || !SSL_is_init_finished(server)); ++i) {
    SSL_do_handshake(client);
    SSL_do_handshake(server);
  }
  std::string cn;
  if (X509* cert = SSL_get1_peer_certificate(client)) {
    char buf[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof(buf));
    cn = buf;
    X509_free(cert);
  }
  SSL_free(client);
  SSL_free(server);
  SSL_CTX_free(client_ctx);
  return cn;
}

}  // namespace

TEST_CASE("tls.certificates: the first certificate valid for the client's SNI is presented, else tls.cert") {
  testing::TestPki pki;
  auto main = pki.issue("main", "DNS:kafka.example.com");
  auto east = pki.issue("east", "DNS:*.east.example.com");
  auto special = pki.issue("special", "DNS:special.example.com,DNS:*.east.example.com");
  config::ServerTlsConfig c;
  c.cert = file(main.cert, "cert", 1);
  c.key = file(main.key, "key", 2);
  c.certificates.push_back({file(east.cert, "certificates[0].cert", 3), file(east.key, "certificates[0].key", 4)});
  c.certificates.push_back({file(special.cert, "certificates[1].cert", 5), file(special.key, "certificates[1].key", 6)});
  std::string error;
  auto ctx = TlsContext::for_clients(c, "kproxy.yaml", &error);
  REQUIRE_MESSAGE(ctx, error);
  CHECK(ctx->certificate_for("broker-1.east.example.com") != nullptr);
  CHECK(ctx->certificate_for("kafka.example.com") == nullptr);
  CHECK(ctx->certificate_for(nullptr) == nullptr);
  CHECK(presented_cn(ctx->native(), "broker-1.east.example.com") == "east");  // the first that fits
  CHECK(presented_cn(ctx->native(), "SPECIAL.example.com") == "special");     // names match without case
  CHECK(presented_cn(ctx->native(), "kafka.example.com") == "main");
  CHECK(presented_cn(ctx->native(), "a.b.east.example.com") == "main");  // a wildcard covers one label
  CHECK(presented_cn(ctx->native(), nullptr) == "main");
  CHECK(ctx->summary().find("for the names it is valid for " + special.cert) != std::string::npos);
}

TEST_CASE("tls.certificates: a key that does not fit its certificate is an error naming the entry") {
  testing::TestPki pki;
  auto main = pki.issue("main", "DNS:kafka.example.com");
  auto other = pki.issue("other", "DNS:other.example.com");
  config::ServerTlsConfig c;
  c.cert = file(main.cert, "cert", 1);
  c.key = file(main.key, "key", 2);
  c.certificates.push_back(
      {file(other.cert, "listeners[0].tls.certificates[0].cert", 3), file(main.key, "listeners[0].tls.certificates[0].key", 4)});
  std::string error;
  CHECK_FALSE(TlsContext::for_clients(c, "kproxy.yaml", &error));
  CHECK(error.find("listeners[0].tls.certificates[0].key") != std::string::npos);
  CHECK(error.find("does not belong to the certificate") != std::string::npos);
}
