// TlsFailure: why a TLS handshake or record failed, in words an operator can act on.
//
// OpenSSL reports a failed handshake as a stack of library errors plus, when the peer's
// certificate was rejected, a verify result. classify_tls_failure() turns the two into one kind
// (for tests and counters) and one sentence that names the peer's role ("broker", "client"), e.g.
//   "unknown CA: the broker's certificate (CN=kafka-1) is not signed by a trusted CA (unable to get
//    local issuer certificate)".
#pragma once

#include <cstdint>
#include <string>

#include <openssl/ssl.h>

namespace kproxy::tls {

struct TlsFailure {
  enum class Kind : uint8_t {
    kUnknownCa,               ///< we rejected the peer's certificate: it does not chain to our CAs
    kHostnameMismatch,        ///< we rejected the peer's certificate: not issued for the host
    kCertificateExpired,      ///< we rejected the peer's certificate: expired
    kCertificateNotYetValid,  ///< we rejected the peer's certificate: not valid yet
    kBadCertificate,          ///< we rejected the peer's certificate for another reason
    kNoPeerCertificate,       ///< a client certificate is required and none was sent
    kRejectedByPeer,          ///< the peer sent an alert rejecting our certificate or parameters
    kVersionMismatch,         ///< no TLS version both sides accept
    kNotTls,                  ///< the peer does not speak TLS (a plaintext port or client)
    kClosedDuringHandshake,   ///< the peer closed the TCP connection before the handshake finished
    kOther,
  };
  Kind kind = Kind::kOther;
  std::string message;
};

/// The certificate our verification rejected, recorded by record_rejected_certificate() (after a
/// failed verification OpenSSL no longer hands out the peer's certificate).
struct RejectedCertificate {
  std::string subject;    ///< "CN=kafka-1,O=test"
  std::string not_after;  ///< "Nov 29 14:00:00 2026 GMT"
};

/// Verify callback for SSL_CTX_set_verify: when a certificate fails, copies its subject and end
/// of validity into the RejectedCertificate that SSL_get_app_data() of the connection points to.
int record_rejected_certificate(int preverify_ok, X509_STORE_CTX* store);

/// Short stable name of a kind ("unknown-ca", "hostname-mismatch", ...), for logs and tests.
const char* tls_failure_kind_name(TlsFailure::Kind kind);

/// Classifies the failure of `ssl` after an OpenSSL call failed with SSL_ERROR_SSL (or
/// SSL_ERROR_SYSCALL). Consumes the thread's OpenSSL error queue. `peer` names the other side
/// ("broker", "client"); `server_name` is the host the certificate was checked against ("" if none).
/// `rejected` is what record_rejected_certificate() saw (may be empty).
TlsFailure classify_tls_failure(SSL* ssl, const char* peer, const std::string& server_name, const RejectedCertificate& rejected);

/// The failure for bytes from a client that cannot start a TLS record (a plaintext Kafka client
/// on a TLS port): `first_byte` is what arrived instead of a handshake record (0x16).
TlsFailure not_tls_from_client(uint8_t first_byte);

/// The failure for a TCP close before the handshake finished.
TlsFailure closed_during_handshake(const char* peer, bool we_are_client);

}  // namespace kproxy::tls
