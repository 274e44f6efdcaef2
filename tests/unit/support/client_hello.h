// A real TLS ClientHello for the unit tests of what reads one (proxy/tls/client_hello,
// proxy/connection/sni_route).
#pragma once

#include <openssl/ssl.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kproxy::testing {

/// The ClientHello an OpenSSL client session writes into a memory BIO, as TLS records;
/// `server_name` empty: no SNI; `max_version` caps the protocol version it offers.
inline std::vector<uint8_t> client_hello(const std::string& server_name, int max_version = TLS1_3_VERSION) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_max_proto_version(ctx, max_version);
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  if (!server_name.empty()) SSL_set_tlsext_host_name(ssl, server_name.c_str());
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);  // writes the ClientHello, then wants to read
  std::vector<uint8_t> bytes(static_cast<size_t>(BIO_ctrl_pending(out)));
  BIO_read(out, bytes.data(), static_cast<int>(bytes.size()));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return bytes;
}

}  // namespace kproxy::testing
