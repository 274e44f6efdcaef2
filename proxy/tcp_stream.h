// TcpStream: one TCP socket of a proxied connection (client side or upstream side) on a libuv
// loop, with an ordered outbound queue and the backpressure marks.
//
// Frames to send are appended to `pending_` while a read callback runs; flush() hands them to the
// kernel with one uv_try_write and queues only what did not fit as one uv_write (the write
// request embeds its buffer). queued_bytes() is what the owner checks against the high-water mark
// to stop reading the other side; on_stream_writable fires when the queue drains below the
// low-water mark. When idle, a stream holds no buffer of its own.
//
// With use_tls(), a TlsSession (proxy/tls/tls_session.h) sits between the owner and the socket:
// on_stream_read delivers decrypted bytes, append() takes plaintext and flush() encrypts it first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <uv.h>

#include "codec/reader.h"

namespace kproxy::proxy {

namespace tls {
class TlsSession;
}

/// Stop reading the other side above this many queued bytes...
inline constexpr size_t kWriteQueueHighWater = 1 << 20;
/// ...and resume below this many.
inline constexpr size_t kWriteQueueLowWater = 256 << 10;

class TcpStream;

/// What a TcpStream reports to the connection that owns it. Each call happens on the loop thread.
class TcpStreamEvents {
 public:
  virtual ~TcpStreamEvents() = default;
  /// Bytes arrived; the view is valid only during the call.
  virtual void on_stream_read(TcpStream& s, codec::Bytes data) = 0;
  /// The peer closed (UV_EOF) or the socket failed (status < 0), or a write failed.
  virtual void on_stream_error(TcpStream& s, int status, const char* during) = 0;
  /// The write queue fell below the low-water mark after having been above the high-water mark.
  virtual void on_stream_writable(TcpStream& s) = 0;
  /// The handle is closed; the stream may be destroyed now.
  virtual void on_stream_closed(TcpStream& s) = 0;
  /// TLS failed (handshake, certificate, or a bad record); `reason` says what. The stream has
  /// stopped reading. By default reported as a failed read.
  virtual void on_stream_tls_failed(TcpStream& s, const std::string& reason) {
    (void)reason;
    on_stream_error(s, UV_EPROTO, "TLS");
  }
  /// The TLS handshake completed (s.tls() says with what).
  virtual void on_stream_tls_established(TcpStream& s) { (void)s; }
};

class TcpStream {
 public:
  /// `name` ("client", "upstream") appears in log lines.
  TcpStream(uv_loop_t* loop, TcpStreamEvents& events, const char* name);
  ~TcpStream();
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  uv_tcp_t* handle() { return &handle_; }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&handle_); }
  const char* name() const { return name_; }

  /// Marks the socket connected: flush() sends from now on.
  void set_connected() { connected_ = true; }
  bool connected() const { return connected_; }

  void start_reading();
  void stop_reading();
  bool reading() const { return reading_; }

  /// Appends bytes to send (copied). Call flush() when done appending.
  void append(codec::Bytes bytes);
  /// Sends what was appended. Returns false if the socket failed (on_stream_error was called).
  bool flush();
  /// Bytes appended but not yet written to the kernel.
  size_t queued_bytes() const { return pending_.size() + writing_bytes_ + tls_held_bytes(); }
  bool above_high_water() const { return queued_bytes() > kWriteQueueHighWater; }

  /// Closes now; queued writes are cancelled.
  void close();
  /// Flushes, waits for queued writes, half-closes (uv_shutdown), then closes.
  void shutdown_and_close();
  bool closing() const { return closing_; }
  bool closed() const { return closed_; }

  /// "ip:port" of the peer, "" if unknown.
  std::string peer_address() const;

  /// Speaks TLS over this socket from now on (before any byte is read or appended). A client
  /// session's ClientHello goes out with the first flush() after connecting.
  void use_tls(std::unique_ptr<tls::TlsSession> session);
  /// The TLS session, nullptr on a plaintext stream.
  const tls::TlsSession* tls() const { return tls_.get(); }

 private:
  struct WriteRequest {
    uv_write_t req;
    TcpStream* stream;
    std::vector<uint8_t> data;
  };

  static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf);
  static void after_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
  static void after_write(uv_write_t* req, int status);
  static void after_shutdown(uv_shutdown_t* req, int status);
  static void on_close(uv_handle_t* h);
  void begin_shutdown();
  // TLS filter (tcp_stream.cc, end): decrypt in the read path, encrypt before a flush.
  void read_tls(ssize_t nread, const uv_buf_t* buf);
  bool encrypt_tls();
  void move_tls_output();
  void send_tls_alert();
  size_t tls_held_bytes() const;

  uv_tcp_t handle_;
  uv_shutdown_t shutdown_req_{};
  TcpStreamEvents& events_;
  const char* name_;
  std::vector<uint8_t> pending_;
  size_t writing_bytes_ = 0;
  bool connected_ = false;
  bool reading_ = false;
  bool was_above_high_water_ = false;
  bool shutdown_wanted_ = false;
  bool closing_ = false;
  bool closed_ = false;
  std::unique_ptr<tls::TlsSession> tls_;
};

}  // namespace kproxy::proxy
