#include "proxy/tls/tls_failure.h"

#include <doctest/doctest.h>

using namespace kproxy::tls;

TEST_CASE("failure kinds have stable names") {
  CHECK(std::string(tls_failure_kind_name(TlsFailure::Kind::kUnknownCa)) == "unknown-ca");
  CHECK(std::string(tls_failure_kind_name(TlsFailure::Kind::kHostnameMismatch)) == "hostname-mismatch");
  CHECK(std::string(tls_failure_kind_name(TlsFailure::Kind::kCertificateExpired)) == "certificate-expired");
  CHECK(std::string(tls_failure_kind_name(TlsFailure::Kind::kNotTls)) == "not-tls");
}

TEST_CASE("a plaintext client names the byte it sent") {
  auto f = not_tls_from_client(0x00);
  CHECK(f.kind == TlsFailure::Kind::kNotTls);
  CHECK(
      f.message ==
      "protocol mismatch: the client does not speak TLS (first byte 0x00, not a TLS handshake record): a plaintext client on a TLS port?");
}

TEST_CASE("a close during the handshake hints at the likely cause for each side") {
  auto broker = closed_during_handshake("broker", true);
  CHECK(broker.kind == TlsFailure::Kind::kClosedDuringHandshake);
  CHECK(broker.message.find("the broker closed the connection during the TLS handshake (a plaintext port?") == 0);
  auto client = closed_during_handshake("client", false);
  CHECK(client.message == "the client closed the connection during the TLS handshake (does it trust kproxy's certificate?)");
}
