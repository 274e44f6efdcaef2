// TlsContext: one OpenSSL SSL_CTX built from a listener's `tls:` (kproxy as the server for
// clients) or `upstream_tls:` (kproxy as the client of brokers) section (config/tls_config.h).
//
// A context holds the certificates, keys and trusted CAs read from the PEM files when it was
// built; a reload builds new contexts, and connections keep the one they started with. OpenSSL
// contexts are safe to share between worker threads (each connection makes its own SSL).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <openssl/ssl.h>

#include "config/tls_config.h"

namespace kproxy::tls {

class TlsContext {
 public:
  enum class Role : uint8_t { kClient, kServer };

  /// For connections to brokers. nullptr and `error` ("file:line:col: key: why") when a file
  /// cannot be loaded; `source` is the config file named in errors.
  static std::shared_ptr<const TlsContext> for_upstream(const config::UpstreamTlsConfig& config, const std::string& source,
                                                        std::string* error);
  /// For connections from clients; like for_upstream.
  static std::shared_ptr<const TlsContext> for_clients(const config::ServerTlsConfig& config, const std::string& source,
                                                       std::string* error);

  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* native() const { return ctx_; }
  /// Server role with tls.certificates: the first of them valid for `server_name` (X509_check_host:
  /// DNS names, wildcards included), else nullptr (the main certificate serves).
  SSL_CTX* certificate_for(const char* server_name) const;
  Role role() const { return role_; }
  /// Client role: check the certificate against the host connected to.
  bool verify_hostname() const { return verify_hostname_; }
  /// One line for the start-up log: "TLS 1.2+, CA /etc/ca.pem, client certificate /etc/c.pem".
  const std::string& summary() const { return summary_; }

 private:
  TlsContext(SSL_CTX* ctx, Role role) : ctx_(ctx), role_(role) {}

  SSL_CTX* ctx_;
  Role role_;
  bool verify_hostname_ = false;
  /// tls.certificates, in order: contexts holding only their identity, switched to by the
  /// servername callback (SSL_set_SSL_CTX) once the ClientHello's SNI is known.
  std::vector<SSL_CTX*> by_name_;
  std::string summary_;
};

}  // namespace kproxy::tls
