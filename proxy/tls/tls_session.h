// TlsSession: one connection's TLS state, an OpenSSL SSL whose network side is a pair of BIOs of
// kproxy's own over memory, so the ciphertext travels over libuv like any other bytes and nothing
// blocks.
//
//   socket bytes ──► receive() ──► input BIO (reads the received bytes in place) ──► SSL ──► plaintext callback
//   send(plaintext) ──► (held until established, small writes batched until encrypt())
//                       ──► SSL ──► output BIO (appends to a buffer) ──► take_output() ──► socket
//
// Not OpenSSL's memory BIOs: those copy every received byte into their own buffer first, and
// zero their buffers as they grow and on every reset (BUF_MEM_grow_clean, BIO_reset), which
// perf showed as 3.6 % of kproxy's CPU with TLS on both legs at 1 KiB frames (bench/tls/README.md).
//
// The handshake runs inside receive(): handshake messages the peer must get appear in the output.
// Plaintext sent before the handshake completes is held and encrypted as soon as it does.
// A failure leaves failure() set; the output may still hold an alert for the peer.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include <openssl/ssl.h>

#include "codec/frame_buffer.h"
#include "codec/reader.h"
#include "proxy/tls/tls_context.h"
#include "proxy/tls/tls_failure.h"

namespace kproxy::tls {

class TlsSession {
 public:
  /// Plaintext writes at least this large are encrypted at once (no copy into the held
  /// plaintext); smaller ones are batched into one TLS record run per encrypt(). 16 KiB is the
  /// largest TLS record (RFC 8446 5.1).
  static constexpr size_t kEncryptAtOnce = 16 << 10;

  enum class Status : uint8_t {
    kOk,          ///< nothing wrong (the handshake may still be running)
    kPeerClosed,  ///< the peer sent close_notify: treat like a TCP EOF
    kFailed,      ///< see failure()
  };

  /// `server_name`: in a client session, the host connected to. It is sent as SNI (unless it is
  /// an IP address, RFC 6066 section 3) and, when the context verifies hostnames, the peer's
  /// certificate must be issued for it. Ignored in a server session.
  TlsSession(const TlsContext& context, std::string server_name);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  /// A client session writes its ClientHello to the output; a server session waits for one.
  Status start();
  /// Feeds bytes read from the socket. Each decrypted run of bytes goes to `on_plaintext` (valid
  /// during the call only); when it returns false, receive() stops (the owner is closing).
  ///
  /// `room` (optional) is asked before each run of decryption for room of the owner's own (a large
  /// frame's buffer: FrameReader::read_space); when it offers some, the plaintext is decrypted
  /// straight into it and on_plaintext gets a view of that room (no copy), else a view of a
  /// per-thread buffer.
  using RoomFn = std::function<std::span<uint8_t>()>;
  Status receive(codec::Bytes ciphertext, const std::function<bool(codec::Bytes)>& on_plaintext, const RoomFn& room = nullptr);
  /// Queues plaintext for the peer. Large writes are encrypted at once, small ones on encrypt().
  /// A large write's ciphertext is best taken straight into the write queue (set_output_target):
  /// else it waits whole in the session's own buffer.
  Status send(codec::Bytes plaintext);
  /// True when send() of `n` bytes would only hold them for encrypt() (before the handshake ends,
  /// or a write under kEncryptAtOnce): no ciphertext comes of it now.
  bool holds_send(size_t n) const { return !established_ || n < kEncryptAtOnce; }
  /// Encrypts the plaintext queued by send() (when established).
  Status encrypt();
  /// Queues a close_notify alert (after encrypting what is queued), if the handshake finished.
  void close_notify();

  /// Encrypted bytes waiting to be written to the socket.
  size_t output_size() const;
  /// Hands the waiting encrypted bytes to `sink` (contiguous, valid during the call) and forgets them.
  void take_output(const std::function<void(codec::Bytes)>& sink);
  /// While `target` is set, ciphertext is appended to it (the socket's write queue) instead of
  /// waiting for take_output(): one copy of every byte sent less (issue #48). Take the output
  /// first, so that the order holds; clear the target before it moves or goes away.
  void set_output_target(codec::FrameBuffer* target) { output_target_ = target; }
  /// Plaintext queued and not encrypted yet.
  size_t held_plaintext() const { return held_.size(); }
  /// Called when the connection has nothing in flight: gives back the session's own buffers
  /// (the output and held-plaintext vectors, when empty) and OpenSSL's record buffers. Needed
  /// beside SSL_MODE_RELEASE_BUFFERS: OpenSSL 3.0 sets up both record buffers to process a
  /// post-handshake message (a TLS 1.3 NewSessionTicket from a broker) and the write buffer,
  /// never written through afterwards, stays (16.6 KB; bench/tls/README.md). Cheap when there
  /// is nothing to give back; the next send or receive allocates again.
  void release_idle_memory();
  /// Bytes of the session's own buffers' capacity (output and held plaintext), for tests.
  size_t buffer_capacity() const { return output_.capacity() + held_.capacity(); }

  bool is_client() const { return is_client_; }
  bool established() const { return established_; }
  /// True once any byte arrived from the peer.
  bool received_any() const { return received_any_; }
  /// True once after the handshake completes (reading it clears it).
  bool take_just_established();
  bool failed() const { return failed_; }
  const TlsFailure& failure() const { return failure_; }
  /// The SNI host name: the one the client sent (server session) or sends (client session); ""
  /// if none.
  std::string requested_server_name() const;
  /// "TLSv1.3 TLS_AES_256_GCM_SHA384" once established.
  std::string protocol_and_cipher() const;
  /// The peer as the failure messages name it: "broker" or "client".
  const char* peer_role() const { return is_client_ ? "broker" : "client"; }

 private:
  Status handshake();
  Status fail(TlsFailure failure);
  Status fail_from_openssl();
  Status write_encrypted(codec::Bytes plaintext);
  Status decrypt_available(const std::function<bool(codec::Bytes)>& on_plaintext, const RoomFn& room, bool& stopped);
  /// SSL_read into `into` until it is full or nothing more decrypts; the bytes written, and the
  /// SSL error that stopped it (SSL_ERROR_NONE when it was full).
  size_t read_into(std::span<uint8_t> into, int& error);

  // The BIOs' callbacks (BIO_METHODs made once per process, tls_session.cc).
  static int read_input(BIO* bio, char* out, int len);
  static int write_output(BIO* bio, const char* in, int len);
  static long control(BIO* bio, int cmd, long num, void* ptr);

  SSL* ssl_ = nullptr;
  /// Received ciphertext not yet read by the SSL: a view of receive()'s argument, during that call only.
  codec::Bytes input_;
  /// Ciphertext for the socket, until take_output().
  std::vector<uint8_t> output_;
  /// Where ciphertext goes instead of output_ (set_output_target), or nullptr.
  codec::FrameBuffer* output_target_ = nullptr;
  std::string server_name_;
  RejectedCertificate rejected_;  ///< filled by the verify callback (SSL_get_app_data)
  std::vector<uint8_t> held_;
  bool is_client_;
  bool established_ = false;
  bool just_established_ = false;
  bool received_any_ = false;
  bool failed_ = false;
  TlsFailure failure_;
};

}  // namespace kproxy::tls
