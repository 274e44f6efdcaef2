#include "proxy/tls/tls_session.h"

#include <openssl/buffer.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <climits>

#include <uv.h>

namespace kproxy::proxy::tls {

namespace {
// Plaintext writes at least this large are encrypted at once (no copy into held_); smaller ones
// are batched into one TLS record run per flush. 16 KiB is the largest TLS record (RFC 8446 5.1).
constexpr size_t kEncryptAtOnce = 16 << 10;
// Decrypted bytes are handed over in runs of at most this many.
constexpr size_t kPlaintextChunk = 64 << 10;
// Ciphertext goes into the input BIO, and plaintext is encrypted, in pieces of this size, so
// neither memory BIO grows with the frame size (a 1 MiB frame does not leave 1 MiB buffers).
constexpr size_t kFeedPiece = 32 << 10;
// An emptied memory BIO whose buffer grew beyond this is replaced by a fresh one.
constexpr size_t kKeptBioCapacity = 64 << 10;
// The first byte of a TLS handshake record (RFC 8446 5.1, ContentType handshake).
constexpr uint8_t kHandshakeRecord = 0x16;

bool is_ip_address(const std::string& host) {
  sockaddr_in a4{};
  sockaddr_in6 a6{};
  return uv_ip4_addr(host.c_str(), 0, &a4) == 0 || uv_ip6_addr(host.c_str(), 0, &a6) == 0;
}
// A memory BIO for received ciphertext: empty means "wait for more bytes", not end of stream.
BIO* new_input_bio() {
  BIO* bio = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(bio, -1);
  return bio;
}
// Bytes a memory BIO has allocated.
size_t capacity(BIO* bio) {
  BUF_MEM* mem = nullptr;
  BIO_get_mem_ptr(bio, &mem);
  return mem ? mem->max : 0;
}
}  // namespace

TlsSession::TlsSession(const TlsContext& context, std::string server_name)
    : server_name_(std::move(server_name)), is_client_(context.role() == TlsContext::Role::kClient) {
  ssl_ = SSL_new(context.native());
  network_in_ = new_input_bio();
  network_out_ = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl_, network_in_, network_out_);
  SSL_set_app_data(ssl_, &rejected_);
  if (!is_client_) {
    SSL_set_accept_state(ssl_);
    return;
  }
  SSL_set_connect_state(ssl_);
  if (server_name_.empty()) return;
  bool ip = is_ip_address(server_name_);
  if (!ip) SSL_set_tlsext_host_name(ssl_, server_name_.c_str());
  if (context.verify_hostname()) {
    if (ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), server_name_.c_str());
    } else {
      SSL_set_hostflags(ssl_, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      SSL_set1_host(ssl_, server_name_.c_str());
    }
  }
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

TlsSession::Status TlsSession::fail(TlsFailure failure) {
  if (!failed_) {
    failed_ = true;
    failure_ = std::move(failure);
  }
  held_.clear();
  return Status::kFailed;
}

TlsSession::Status TlsSession::fail_from_openssl() {
  TlsFailure failure = classify_tls_failure(ssl_, peer_role(), server_name_, rejected_);
  // In TLS 1.3 a broker refuses a missing client certificate only after the client finished its
  // side of the handshake, with a bad_certificate or certificate_required alert (RFC 8446 4.4.2.4).
  if (failure.kind == TlsFailure::Kind::kRejectedByPeer && is_client_ && SSL_get_certificate(ssl_) == nullptr) {
    failure.message += " (kproxy sent no client certificate: if the broker requires one, set upstream_tls.cert and key)";
  }
  return fail(std::move(failure));
}

TlsSession::Status TlsSession::start() {
  if (!is_client_) return Status::kOk;
  return handshake();
}

TlsSession::Status TlsSession::handshake() {
  ERR_clear_error();
  int rc = SSL_do_handshake(ssl_);
  if (rc == 1) {
    established_ = true;
    just_established_ = true;
    return encrypt();
  }
  int error = SSL_get_error(ssl_, rc);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return Status::kOk;
  return fail_from_openssl();
}

TlsSession::Status TlsSession::receive(codec::Bytes ciphertext, const std::function<bool(codec::Bytes)>& on_plaintext) {
  if (failed_) return Status::kFailed;
  if (ciphertext.empty()) return Status::kOk;
  if (!received_any_) {
    received_any_ = true;
    // A plaintext Kafka request starts with its size (0x00 first for any frame under 16 MiB);
    // say so plainly instead of OpenSSL's "wrong version number".
    if (!is_client_ && ciphertext[0] != kHandshakeRecord) return fail(not_tls_from_client(ciphertext[0]));
  }
  // Fed in record-sized pieces, each decrypted before the next: the input BIO stays small.
  while (!ciphertext.empty()) {
    size_t part = std::min(ciphertext.size(), kFeedPiece);
    if (BIO_write(network_in_, ciphertext.data(), static_cast<int>(part)) != static_cast<int>(part)) {
      return fail(TlsFailure{TlsFailure::Kind::kOther, "cannot buffer received TLS bytes"});
    }
    ciphertext = ciphertext.subspan(part);
    if (!established_) {
      Status s = handshake();
      if (s != Status::kOk) return s;
      if (!established_) continue;
    }
    bool stopped = false;
    Status s = decrypt_available(on_plaintext, stopped);
    if (s != Status::kOk || stopped) return s;
  }
  if (BIO_ctrl_pending(network_in_) == 0 && capacity(network_in_) > kKeptBioCapacity) {
    network_in_ = new_input_bio();
    SSL_set0_rbio(ssl_, network_in_);  // frees the old one
  }
  return Status::kOk;
}

TlsSession::Status TlsSession::decrypt_available(const std::function<bool(codec::Bytes)>& on_plaintext, bool& stopped) {
  // On the heap: a 64 KiB thread_local array would grow every thread's static TLS block.
  static thread_local std::vector<uint8_t> plaintext(kPlaintextChunk);
  for (;;) {
    ERR_clear_error();
    int n = SSL_read(ssl_, plaintext.data(), static_cast<int>(plaintext.size()));
    if (n > 0) {
      if (!on_plaintext(codec::Bytes(plaintext.data(), static_cast<size_t>(n)))) {
        stopped = true;
        return Status::kOk;
      }
      continue;
    }
    int error = SSL_get_error(ssl_, n);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return Status::kOk;
    if (error == SSL_ERROR_ZERO_RETURN) return Status::kPeerClosed;
    return fail_from_openssl();
  }
}

TlsSession::Status TlsSession::send(codec::Bytes plaintext) {
  if (failed_) return Status::kFailed;
  if (!established_ || plaintext.size() < kEncryptAtOnce) {
    held_.insert(held_.end(), plaintext.begin(), plaintext.end());
    return Status::kOk;
  }
  if (Status s = encrypt(); s != Status::kOk) return s;  // keep the order of earlier small writes
  return write_encrypted(plaintext);
}

TlsSession::Status TlsSession::encrypt() {
  if (failed_) return Status::kFailed;
  if (!established_ || held_.empty()) return Status::kOk;
  Status s = write_encrypted(held_);
  held_.clear();
  if (held_.capacity() > kKeptBioCapacity) std::vector<uint8_t>().swap(held_);
  return s;
}

TlsSession::Status TlsSession::write_encrypted(codec::Bytes plaintext) {
  // A memory BIO never refuses bytes, so SSL_write takes everything it is given (up to INT_MAX).
  while (!plaintext.empty()) {
    size_t part = std::min<size_t>(plaintext.size(), INT_MAX);
    ERR_clear_error();
    int n = SSL_write(ssl_, plaintext.data(), static_cast<int>(part));
    if (n <= 0) return fail_from_openssl();
    plaintext = plaintext.subspan(static_cast<size_t>(n));
  }
  return Status::kOk;
}

void TlsSession::close_notify() {
  if (!established_ || failed_) return;
  encrypt();
  ERR_clear_error();
  SSL_shutdown(ssl_);
}

size_t TlsSession::output_size() const { return BIO_ctrl_pending(network_out_); }

void TlsSession::take_output(const std::function<void(codec::Bytes)>& sink) {
  char* data = nullptr;
  long n = BIO_get_mem_data(network_out_, &data);
  if (n <= 0) return;
  sink(codec::Bytes(reinterpret_cast<const uint8_t*>(data), static_cast<size_t>(n)));
  if (capacity(network_out_) > kKeptBioCapacity) {
    network_out_ = BIO_new(BIO_s_mem());
    SSL_set0_wbio(ssl_, network_out_);  // frees the old one
  } else {
    (void)BIO_reset(network_out_);
  }
}

bool TlsSession::take_just_established() {
  bool was = just_established_;
  just_established_ = false;
  return was;
}

std::string TlsSession::requested_server_name() const {
  const char* name = SSL_get_servername(ssl_, TLSEXT_NAMETYPE_host_name);
  return name ? name : "";
}

std::string TlsSession::protocol_and_cipher() const {
  if (!established_) return "";
  return std::string(SSL_get_version(ssl_)) + " " + SSL_CIPHER_get_name(SSL_get_current_cipher(ssl_));
}

}  // namespace kproxy::proxy::tls
