// TLS settings of a listener, as loaded from YAML: `tls:` for the client leg (clients -> kproxy)
// and `upstream_tls:` for the broker leg (kproxy -> brokers). Only paths and choices live here;
// proxy/tls/tls_context.h turns them into OpenSSL contexts (and reports unreadable files with the
// position kept in TlsFile).
//
//   listeners:
//     - name: kafka
//       ...
//       tls:                          # clients must speak TLS to kproxy
//         cert: /etc/kproxy/server.pem
//         key: /etc/kproxy/server.key
//         client_ca: /etc/kproxy/clients-ca.pem   # optional: verify client certificates
//         client_auth: required       # required (default with client_ca) | requested | none
//         min_version: "1.2"          # "1.2" (default) or "1.3"
//         certificates:               # optional: more certificates, each presented to a client
//           - { cert: /etc/kproxy/b.pem, key: /etc/kproxy/b.key }  # whose SNI it is valid for
//       upstream_tls:                 # kproxy speaks TLS to every broker of the cluster
//         ca: /etc/kproxy/cluster-ca.pem          # default: the system trust store
//         cert: /etc/kproxy/client.pem            # optional client certificate (mTLS)...
//         key: /etc/kproxy/client.key             # ...and its key
//         verify_hostname: true       # default; SNI is always the broker's advertised host
//         min_version: "1.2"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kproxy::config {

enum class TlsVersion : uint8_t { kTls12, kTls13 };

/// A PEM file named in the config, with where it was named (for errors found when loading it).
struct TlsFile {
  std::string path;      ///< "" = not given
  std::string key_path;  ///< "listeners[0].upstream_tls.ca"
  int line = 0;          ///< 1-based position of the value in the config file
  int column = 0;

  bool given() const { return !path.empty(); }
};

/// Whether kproxy asks TLS clients for a certificate.
enum class ClientAuth : uint8_t {
  kNone,       ///< no client certificate is asked for
  kRequested,  ///< asked for and verified if sent
  kRequired,   ///< the handshake fails without a valid client certificate
};

/// One entry of `listeners[].tls.certificates`.
struct CertificateFiles {
  TlsFile cert;
  TlsFile key;
};

/// `listeners[].tls`: kproxy is the TLS server for clients.
struct ServerTlsConfig {
  TlsFile cert;  ///< certificate chain, leaf first (required)
  TlsFile key;   ///< private key of the leaf (required)
  /// More certificates: a client whose SNI one of them is valid for (its DNS names, wildcards
  /// included, RFC 6125) gets the first such; any other client gets `cert`.
  std::vector<CertificateFiles> certificates;
  TlsFile client_ca;  ///< CAs client certificates must chain to (optional)
  ClientAuth client_auth = ClientAuth::kNone;
  TlsVersion min_version = TlsVersion::kTls12;
};

/// `listeners[].upstream_tls`: kproxy is the TLS client of every broker.
struct UpstreamTlsConfig {
  TlsFile ca;    ///< trusted CAs; not given = the system's default trust store
  TlsFile cert;  ///< client certificate chain for mTLS (optional, with key)
  TlsFile key;
  /// The broker's certificate must name the host kproxy connects to (the bootstrap host, or the
  /// host the broker advertises). SNI carries that host whether or not this is on.
  bool verify_hostname = true;
  TlsVersion min_version = TlsVersion::kTls12;
};

}  // namespace kproxy::config
