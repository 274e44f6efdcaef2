#include "proxy/tls/tls_session.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include <uv.h>

namespace kproxy::tls {

namespace {
// Decrypted bytes are handed over in runs of at most this many.
constexpr size_t kPlaintextChunk = 64 << 10;
// An emptied output buffer that grew beyond this is given back.
constexpr size_t kKeptBioCapacity = 64 << 10;
// The first byte of a TLS handshake record (RFC 8446 5.1, ContentType handshake).
constexpr uint8_t kHandshakeRecord = 0x16;

bool is_ip_address(const std::string& host) {
  sockaddr_in a4{};
  sockaddr_in6 a6{};
  return uv_ip4_addr(host.c_str(), 0, &a4) == 0 || uv_ip6_addr(host.c_str(), 0, &a6) == 0;
}

int bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

BIO_METHOD* bio_method(const char* name, int (*read)(BIO*, char*, int), int (*write)(BIO*, const char*, int),
                       long (*control)(BIO*, int, long, void*)) {
  BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, name);
  if (read) BIO_meth_set_read(m, read);
  if (write) BIO_meth_set_write(m, write);
  BIO_meth_set_ctrl(m, control);
  BIO_meth_set_create(m, bio_create);
  return m;
}
}  // namespace

int TlsSession::read_input(BIO* bio, char* out, int len) {
  auto* self = static_cast<TlsSession*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (self->input_.empty() || len <= 0) {
    BIO_set_retry_read(bio);  // "wait for more bytes", not end of stream
    return -1;
  }
  size_t n = std::min(self->input_.size(), static_cast<size_t>(len));
  std::memcpy(out, self->input_.data(), n);
  self->input_ = self->input_.subspan(n);
  return static_cast<int>(n);
}

int TlsSession::write_output(BIO* bio, const char* in, int len) {
  auto* self = static_cast<TlsSession*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (len <= 0) return 0;
  if (self->output_target_ != nullptr) {
    self->output_target_->append(codec::Bytes(reinterpret_cast<const uint8_t*>(in), static_cast<size_t>(len)));
    return len;
  }
  self->output_.insert(self->output_.end(), reinterpret_cast<const uint8_t*>(in), reinterpret_cast<const uint8_t*>(in) + len);
  return len;
}

long TlsSession::control(BIO* bio, int cmd, long, void*) {
  auto* self = static_cast<TlsSession*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;  // nothing is buffered below the output
    case BIO_CTRL_PENDING: return static_cast<long>(self->input_.size());
    case BIO_CTRL_WPENDING: return static_cast<long>(self->output_.size());
    default: return 0;  // not at EOF; no kTLS, no datagrams
  }
}

TlsSession::TlsSession(const TlsContext& context, std::string server_name)
    : server_name_(std::move(server_name)), is_client_(context.role() == TlsContext::Role::kClient) {
  // One BIO_METHOD per direction for the process (thread-safe static initialisation; they live
  // until exit, as OpenSSL's own methods do).
  static BIO_METHOD* const input_method = bio_method("kproxy TLS input", &TlsSession::read_input, nullptr, &TlsSession::control);
  static BIO_METHOD* const output_method = bio_method("kproxy TLS output", nullptr, &TlsSession::write_output, &TlsSession::control);
  ssl_ = SSL_new(context.native());
  BIO* in = BIO_new(input_method);
  BIO* out = BIO_new(output_method);
  BIO_set_data(in, this);
  BIO_set_data(out, this);
  SSL_set_bio(ssl_, in, out);  // owned by ssl_ from here on
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

TlsSession::Status TlsSession::receive(codec::Bytes ciphertext, const std::function<bool(codec::Bytes)>& on_plaintext, const RoomFn& room) {
  if (failed_) return Status::kFailed;
  if (ciphertext.empty()) return Status::kOk;
  if (!received_any_) {
    received_any_ = true;
    // A plaintext Kafka request starts with its size (0x00 first for any frame under 16 MiB);
    // say so plainly instead of OpenSSL's "wrong version number".
    if (!is_client_ && ciphertext[0] != kHandshakeRecord) return fail(not_tls_from_client(ciphertext[0]));
  }
  // The input BIO reads these bytes in place during this call (OpenSSL keeps a partial record
  // in its own buffer): a handshake reads until it needs more, SSL_read until nothing is left.
  input_ = ciphertext;
  Status s = Status::kOk;
  if (!established_) s = handshake();
  if (s == Status::kOk && established_) {
    bool stopped = false;
    s = decrypt_available(on_plaintext, room, stopped);
  }
  input_ = {};  // a view of the caller's bytes: never kept past the call
  return s;
}

size_t TlsSession::read_into(std::span<uint8_t> into, int& error) {
  size_t filled = 0;
  error = SSL_ERROR_NONE;
  while (filled < into.size()) {
    ERR_clear_error();
    int n = SSL_read(ssl_, into.data() + filled, static_cast<int>(std::min<size_t>(into.size() - filled, INT_MAX)));
    if (n <= 0) {
      error = SSL_get_error(ssl_, n);
      break;
    }
    filled += static_cast<size_t>(n);
  }
  return filled;
}

TlsSession::Status TlsSession::decrypt_available(const std::function<bool(codec::Bytes)>& on_plaintext, const RoomFn& room, bool& stopped) {
  // On the heap: a 64 KiB thread_local array would grow every thread's static TLS block.
  static thread_local std::vector<uint8_t> plaintext(kPlaintextChunk);
  for (;;) {
    // Every record there is, into one run: the owner's room when it offers some (the rest of a
    // large frame, decrypted in place: issue #35), else up to kPlaintextChunk here, so that the
    // owner handles one piece per read, not one per record.
    std::span<uint8_t> into = room ? room() : std::span<uint8_t>();
    if (into.empty()) into = std::span<uint8_t>(plaintext.data(), plaintext.size());
    int error = SSL_ERROR_NONE;
    size_t filled = read_into(into, error);
    Status after = Status::kOk;
    if (error == SSL_ERROR_ZERO_RETURN) {
      after = Status::kPeerClosed;
    } else if (error != SSL_ERROR_NONE && error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
      after = fail_from_openssl();  // now: the owner's handling of the plaintext may use OpenSSL's error queue
    }
    if (filled > 0 && !on_plaintext(codec::Bytes(into.data(), filled))) {
      stopped = true;
      return after;
    }
    if (error == SSL_ERROR_NONE) continue;  // the run was full: read on
    return after;
  }
}

TlsSession::Status TlsSession::send(codec::Bytes plaintext) {
  if (failed_) return Status::kFailed;
  if (holds_send(plaintext.size())) {
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
  // The output BIO never refuses bytes, so SSL_write takes everything it is given (up to INT_MAX).
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

size_t TlsSession::output_size() const { return output_.size(); }

void TlsSession::take_output(const std::function<void(codec::Bytes)>& sink) {
  if (output_.empty()) return;
  sink(codec::Bytes(output_.data(), output_.size()));
  output_.clear();
  if (output_.capacity() > kKeptBioCapacity) std::vector<uint8_t>().swap(output_);
}

void TlsSession::release_idle_memory() {
  if (output_.empty()) std::vector<uint8_t>().swap(output_);
  if (held_.empty()) std::vector<uint8_t>().swap(held_);
  // Frees the read and write record buffers unless a partial record or unsent bytes are in
  // them, in which case it returns 0 and keeps them (SSL_free_buffers(3), OpenSSL 3.0).
  if (established_ && !failed_) (void)SSL_free_buffers(ssl_);
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

}  // namespace kproxy::tls
