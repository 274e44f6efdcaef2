#include "proxy/tls/tls_context.h"

#include <doctest/doctest.h>

#include <string>

#include "tests/unit/proxy/tls/test_pki.h"

using namespace kproxy;
using proxy::tls::TlsContext;

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
