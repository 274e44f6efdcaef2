#include "proxy/tls/tls_context.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "proxy/tls/tls_failure.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kproxy::tls {

namespace {

// "file:line:col: listeners[0].upstream_tls.ca: cannot load '/x.pem': why".
std::string file_error(const std::string& source, const config::TlsFile& f, const std::string& why) {
  std::string out = source;
  if (f.line > 0) out += ":" + std::to_string(f.line) + ":" + std::to_string(f.column);
  return out + ": " + f.key_path + ": cannot load '" + f.path + "': " + why;
}

// The most specific OpenSSL error on the queue, which is emptied; its reason code in `code`.
std::string openssl_reason(int* code = nullptr) {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    const char* r = ERR_reason_error_string(e);
    out = r ? r : "unknown OpenSSL error";
    if (code) *code = ERR_GET_REASON(e);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

// A missing or unreadable file gets the system's words, not OpenSSL's.
bool readable(const std::string& source, const config::TlsFile& f, std::string* error) {
  std::FILE* file = std::fopen(f.path.c_str(), "rb");
  if (file == nullptr) {
    *error = file_error(source, f, std::strerror(errno));
    return false;
  }
  std::fclose(file);
  return true;
}

int min_proto(config::TlsVersion v) { return v == config::TlsVersion::kTls13 ? TLS1_3_VERSION : TLS1_2_VERSION; }
const char* version_label(config::TlsVersion v) { return v == config::TlsVersion::kTls13 ? "TLS 1.3" : "TLS 1.2+"; }

// Loads the certificate chain and its key, and checks that they belong together.
bool load_identity(SSL_CTX* ctx, const std::string& source, const config::TlsFile& cert, const config::TlsFile& key, std::string* error) {
  if (!readable(source, cert, error) || !readable(source, key, error)) return false;
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.path.c_str()) != 1) {
    *error = file_error(source, cert, "not a PEM certificate chain (" + openssl_reason() + ")");
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key.path.c_str(), SSL_FILETYPE_PEM) != 1) {
    int code = 0;
    std::string reason = openssl_reason(&code);
    *error =
        file_error(source, key,
                   code == X509_R_KEY_VALUES_MISMATCH ? "the key does not belong to the certificate in '" + cert.path + "' (" + reason + ")"
                                                      : "not an unencrypted PEM private key (" + reason + ")");
    return false;
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    *error = file_error(source, key, "the key does not belong to the certificate in '" + cert.path + "' (" + openssl_reason() + ")");
    return false;
  }
  return true;
}

bool load_trusted_cas(SSL_CTX* ctx, const std::string& source, const config::TlsFile& ca, std::string* error) {
  if (!readable(source, ca, error)) return false;
  if (SSL_CTX_load_verify_locations(ctx, ca.path.c_str(), nullptr) != 1) {
    *error = file_error(source, ca, "no PEM CA certificate in it (" + openssl_reason() + ")");
    return false;
  }
  return true;
}

}  // namespace

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
  for (SSL_CTX* c : by_name_) SSL_CTX_free(c);
}

SSL_CTX* TlsContext::certificate_for(const char* server_name) const {
  if (server_name == nullptr) return nullptr;
  for (SSL_CTX* c : by_name_) {
    X509* cert = SSL_CTX_get0_certificate(c);
    if (cert != nullptr && X509_check_host(cert, server_name, std::strlen(server_name), 0, nullptr) == 1) return c;
  }
  return nullptr;
}

namespace {

// The servername callback (RFC 6066 section 3): the certificate of tls.certificates valid for the
// name the client asked for, if any; the main one otherwise. Never refuses: which names a
// listener serves is the SNI listener's decision (proxy/connection/sni_route.h), made earlier.
int choose_certificate(SSL* ssl, int* /*alert*/, void* arg) {
  const auto* self = static_cast<const TlsContext*>(arg);
  if (SSL_CTX* chosen = self->certificate_for(SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name))) SSL_set_SSL_CTX(ssl, chosen);
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

std::shared_ptr<const TlsContext> TlsContext::for_upstream(const config::UpstreamTlsConfig& config, const std::string& source,
                                                           std::string* error) {
  ERR_clear_error();
  SSL_CTX* raw = SSL_CTX_new(TLS_client_method());
  if (raw == nullptr) {
    *error = "cannot create an OpenSSL context: " + openssl_reason();
    return nullptr;
  }
  std::shared_ptr<TlsContext> ctx(new TlsContext(raw, Role::kClient));
  // An idle connection keeps no 16 KiB record buffers (most of a sidecar's connections are idle).
  SSL_CTX_set_mode(raw, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_min_proto_version(raw, min_proto(config.min_version));
  SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, record_rejected_certificate);
  ctx->summary_ = version_label(config.min_version);
  if (config.ca.given()) {
    if (!load_trusted_cas(raw, source, config.ca, error)) return nullptr;
    ctx->summary_ += ", CA " + config.ca.path;
  } else {
    SSL_CTX_set_default_verify_paths(raw);
    ctx->summary_ += ", system CAs";
  }
  if (config.cert.given()) {
    if (!load_identity(raw, source, config.cert, config.key, error)) return nullptr;
    ctx->summary_ += ", client certificate " + config.cert.path;
  }
  ctx->verify_hostname_ = config.verify_hostname;
  ctx->summary_ += config.verify_hostname ? ", hostname verified" : ", hostname NOT verified";
  return ctx;
}

std::shared_ptr<const TlsContext> TlsContext::for_clients(const config::ServerTlsConfig& config, const std::string& source,
                                                          std::string* error) {
  ERR_clear_error();
  SSL_CTX* raw = SSL_CTX_new(TLS_server_method());
  if (raw == nullptr) {
    *error = "cannot create an OpenSSL context: " + openssl_reason();
    return nullptr;
  }
  std::shared_ptr<TlsContext> ctx(new TlsContext(raw, Role::kServer));
  SSL_CTX_set_mode(raw, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_min_proto_version(raw, min_proto(config.min_version));
  // Renegotiation is of no use to Kafka clients and a known way to burn server CPU.
  SSL_CTX_set_options(raw, SSL_OP_NO_RENEGOTIATION);
  // Session resumption with client certificates needs an id context.
  static const unsigned char kSessionContext[] = "kproxy";
  SSL_CTX_set_session_id_context(raw, kSessionContext, sizeof(kSessionContext) - 1);
  ctx->summary_ = version_label(config.min_version);
  if (!load_identity(raw, source, config.cert, config.key, error)) return nullptr;
  ctx->summary_ += ", certificate " + config.cert.path;
  for (const auto& more : config.certificates) {
    SSL_CTX* sub = SSL_CTX_new(TLS_server_method());
    if (sub == nullptr) {
      *error = "cannot create an OpenSSL context: " + openssl_reason();
      return nullptr;
    }
    ctx->by_name_.push_back(sub);  // freed with ctx, whatever happens next
    SSL_CTX_set_session_id_context(sub, kSessionContext, sizeof(kSessionContext) - 1);
    if (!load_identity(sub, source, more.cert, more.key, error)) return nullptr;
    ctx->summary_ += ", for the names it is valid for " + more.cert.path;
  }
  if (!ctx->by_name_.empty()) {
    SSL_CTX_set_tlsext_servername_callback(raw, choose_certificate);
    SSL_CTX_set_tlsext_servername_arg(raw, ctx.get());
  }
  if (config.client_ca.given()) {
    if (!load_trusted_cas(raw, source, config.client_ca, error)) return nullptr;
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(config.client_ca.path.c_str())) SSL_CTX_set_client_CA_list(raw, names);
  }
  switch (config.client_auth) {
    case config::ClientAuth::kNone: SSL_CTX_set_verify(raw, SSL_VERIFY_NONE, nullptr); break;
    case config::ClientAuth::kRequested:
      SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, record_rejected_certificate);
      ctx->summary_ += ", client certificates verified if sent (CA " + config.client_ca.path + ")";
      break;
    case config::ClientAuth::kRequired:
      SSL_CTX_set_verify(raw, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, record_rejected_certificate);
      ctx->summary_ += ", client certificates required (CA " + config.client_ca.path + ")";
      break;
  }
  return ctx;
}

}  // namespace kproxy::tls
