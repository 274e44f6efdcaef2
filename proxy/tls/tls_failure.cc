#include "proxy/tls/tls_failure.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <array>
#include <cstdio>

namespace kproxy::tls {

namespace {

// Everything a memory BIO holds, as text.
std::string take_text(BIO* out) {
  char* data = nullptr;
  long n = BIO_get_mem_data(out, &data);
  std::string text(data, static_cast<size_t>(n > 0 ? n : 0));
  BIO_free(out);
  return text;
}

std::string certificate_of(const char* peer, const std::string& subject) {
  std::string out = std::string("the ") + peer + "'s certificate";
  if (!subject.empty()) out += " (" + subject + ")";
  return out;
}

// The reason of the last error on the queue (the most specific one), and the queue emptied.
unsigned long drain_errors(std::string& text) {
  unsigned long last = 0;
  while (unsigned long e = ERR_get_error()) {
    last = e;
    std::array<char, 256> buf{};
    ERR_error_string_n(e, buf.data(), buf.size());
    if (!text.empty()) text += "; ";
    const char* reason = ERR_reason_error_string(e);
    text += reason ? reason : buf.data();
  }
  return last;
}

}  // namespace

int record_rejected_certificate(int preverify_ok, X509_STORE_CTX* store) {
  if (preverify_ok) return preverify_ok;
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  X509* cert = X509_STORE_CTX_get_current_cert(store);
  auto* rejected = ssl ? static_cast<RejectedCertificate*>(SSL_get_app_data(ssl)) : nullptr;
  if (rejected == nullptr || cert == nullptr || !rejected->subject.empty()) return preverify_ok;
  BIO* subject = BIO_new(BIO_s_mem());
  X509_NAME_print_ex(subject, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  rejected->subject = take_text(subject);
  BIO* when = BIO_new(BIO_s_mem());
  ASN1_TIME_print(when, X509_get0_notAfter(cert));
  rejected->not_after = take_text(when);
  return preverify_ok;
}

const char* tls_failure_kind_name(TlsFailure::Kind kind) {
  switch (kind) {
    case TlsFailure::Kind::kUnknownCa: return "unknown-ca";
    case TlsFailure::Kind::kHostnameMismatch: return "hostname-mismatch";
    case TlsFailure::Kind::kCertificateExpired: return "certificate-expired";
    case TlsFailure::Kind::kCertificateNotYetValid: return "certificate-not-yet-valid";
    case TlsFailure::Kind::kBadCertificate: return "bad-certificate";
    case TlsFailure::Kind::kNoPeerCertificate: return "no-peer-certificate";
    case TlsFailure::Kind::kRejectedByPeer: return "rejected-by-peer";
    case TlsFailure::Kind::kVersionMismatch: return "version-mismatch";
    case TlsFailure::Kind::kNotTls: return "not-tls";
    case TlsFailure::Kind::kClosedDuringHandshake: return "closed-during-handshake";
    case TlsFailure::Kind::kOther: return "other";
  }
  return "other";
}

TlsFailure classify_tls_failure(SSL* ssl, const char* peer, const std::string& server_name, const RejectedCertificate& rejected) {
  std::string errors;
  unsigned long last = drain_errors(errors);
  int reason = last != 0 ? ERR_GET_REASON(last) : 0;
  TlsFailure f;

  // Our own verification of the peer's certificate failed: the verify result says why.
  long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK && reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    std::string cert = certificate_of(peer, rejected.subject);
    std::string detail = X509_verify_cert_error_string(verify);
    switch (verify) {
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
        f.kind = TlsFailure::Kind::kUnknownCa;
        f.message = "unknown CA: " + cert + " is not signed by a trusted CA (" + detail + ")";
        return f;
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        f.kind = TlsFailure::Kind::kHostnameMismatch;
        f.message = "hostname mismatch: " + cert + " is not valid for '" + server_name + "' (" + detail + ")";
        return f;
      case X509_V_ERR_CERT_HAS_EXPIRED:
        f.kind = TlsFailure::Kind::kCertificateExpired;
        f.message = "certificate expired: " + cert + " expired on " + rejected.not_after;
        return f;
      case X509_V_ERR_CERT_NOT_YET_VALID:
        f.kind = TlsFailure::Kind::kCertificateNotYetValid;
        f.message = "certificate not yet valid: " + cert + " (" + detail + ")";
        return f;
      default:
        f.kind = TlsFailure::Kind::kBadCertificate;
        f.message = "certificate rejected: " + cert + ": " + detail;
        return f;
    }
  }

  switch (reason) {
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
      f.kind = TlsFailure::Kind::kNoPeerCertificate;
      f.message = std::string("no certificate: the ") + peer + " sent none and one is required";
      return f;
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
    case SSL_R_RECORD_LENGTH_MISMATCH:
      f.kind = TlsFailure::Kind::kNotTls;
      f.message = std::string("protocol mismatch: the ") + peer + " does not speak TLS (a plaintext port?): " + errors;
      return f;
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
    case SSL_R_UNKNOWN_PROTOCOL:
    case SSL_R_WRONG_SSL_VERSION:
      f.kind = TlsFailure::Kind::kVersionMismatch;
      f.message = std::string("TLS version mismatch with the ") + peer + ": " + errors;
      return f;
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      f.kind = TlsFailure::Kind::kRejectedByPeer;
      f.message = std::string("the ") + peer + " rejected the handshake: " + errors;
      return f;
    default: break;
  }
  f.kind = TlsFailure::Kind::kOther;
  f.message = std::string("TLS error with the ") + peer + ": " + (errors.empty() ? "unknown error" : errors);
  return f;
}

TlsFailure not_tls_from_client(uint8_t first_byte) {
  char hex[8];
  std::snprintf(hex, sizeof(hex), "0x%02x", first_byte);
  return TlsFailure{TlsFailure::Kind::kNotTls, std::string("protocol mismatch: the client does not speak TLS (first byte ") + hex +
                                                   ", not a TLS handshake record): a plaintext client on a TLS port?"};
}

TlsFailure closed_during_handshake(const char* peer, bool we_are_client) {
  std::string message = std::string("the ") + peer + " closed the connection during the TLS handshake";
  message += we_are_client ? " (a plaintext port? or it rejected kproxy's client certificate)" : " (does it trust kproxy's certificate?)";
  return TlsFailure{TlsFailure::Kind::kClosedDuringHandshake, message};
}

}  // namespace kproxy::tls
