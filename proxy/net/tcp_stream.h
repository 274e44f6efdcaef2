// TcpStream: one TCP socket of a proxied connection (client side or upstream side) on a libuv
// loop, with an ordered outbound queue and the backpressure marks.
//
// Outbound bytes are queued as segments, in order, three ways:
//   append(bytes)          a copy (into the last copied segment when there is one): any bytes;
//   append(FrameBuffer&&)  a buffer moved in, e.g. a frame the FrameReader gathered: no copy;
//   append_borrowed(bytes) a view, e.g. frames inside the piece just read: no copy, but the
//                          bytes must stay valid until the next flush().
// flush() hands the queue to the kernel with one uv_try_write (writev over the segments); what
// did not fit becomes one uv_write whose request owns the segments (borrowed ones are copied
// then, and only then) until after_write. So a frame forwarded unchanged is copied only by the
// kernel, unless the socket is backed up. queued_bytes() is what the owner checks against the
// high-water mark to stop reading the other side; on_stream_writable fires when the queue drains
// below the low-water mark. When idle, a stream holds no buffer of its own.
//
// Reads land in one buffer shared by every stream of the loop thread, unless the owner offers
// room of its own (TcpStreamEvents::read_space): a large frame is then read straight into the
// buffer it will be written from.
//
// With use_tls(), a TlsSession (proxy/tls/tls_session.h) sits between the owner and the socket:
// on_stream_read delivers decrypted bytes, the append()s take plaintext (the session copies it)
// and flush() encrypts it first. The socket's ciphertext goes to the shared buffer; read_space
// is asked for the plaintext instead: the rest of a large frame is decrypted straight into it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <uv.h>

#include "codec/frame_buffer.h"
#include "codec/reader.h"
#include "proxy/net/uv_handle.h"

namespace kproxy::tls {
class TlsSession;
}

namespace kproxy::net {

/// Stop reading the other side above this many queued bytes...
inline constexpr size_t kWriteQueueHighWater = 1 << 20;
/// ...and resume below this many.
inline constexpr size_t kWriteQueueLowWater = 256 << 10;

class TcpStream;

/// What a TcpStream reports to the connection that owns it. Each call happens on the loop thread.
class TcpStreamEvents {
 public:
  virtual ~TcpStreamEvents() = default;
  /// Bytes arrived; the view is valid only during the call (bytes read into read_space() stay
  /// where they were read).
  virtual void on_stream_read(TcpStream& s, codec::Bytes data) = 0;
  /// The peer closed (UV_EOF) or the socket failed (status < 0), or a write failed.
  virtual void on_stream_error(TcpStream& s, int status, const char* during) = 0;
  /// The write queue fell below the low-water mark after having been above the high-water mark.
  virtual void on_stream_writable(TcpStream& s) = 0;
  /// The handle is closed; the stream may be destroyed now.
  virtual void on_stream_closed(TcpStream& s) = 0;
  /// Asked before each read: room of the owner's to read the next bytes into (e.g. the rest of a
  /// large frame, FrameReader::read_space), or empty for the loop's shared read buffer. On a TLS
  /// stream it is asked before each run of decryption, for the plaintext.
  virtual std::span<uint8_t> read_space(TcpStream&) { return {}; }
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

  uv_tcp_t* handle() { return handle_.get(); }
  uv_stream_t* stream() { return handle_.stream(); }
  const char* name() const { return name_; }

  /// Marks the socket connected: flush() sends from now on.
  void set_connected() { connected_ = true; }
  bool connected() const { return connected_; }

  void start_reading();
  void stop_reading();
  bool reading() const { return reading_; }

  /// Queues a copy of `bytes`. Call flush() when done appending.
  void append(codec::Bytes bytes);
  /// Queues `buffer` itself (moved in, no copy), but for its first `already_sent` bytes, which
  /// went out before (a frame forwarded while it arrived: FrameReader::take_unstreamed).
  void append(codec::FrameBuffer&& buffer, size_t already_sent = 0);
  /// Queues a view of `bytes`, which must stay valid and unchanged until the next flush().
  void append_borrowed(codec::Bytes bytes);
  /// Sends what was appended; afterwards nothing borrowed is held. Returns false if the socket
  /// failed (on_stream_error was called; the bytes queued so far are dropped).
  bool flush();
  /// Bytes appended but not yet written to the kernel.
  size_t queued_bytes() const { return pending_bytes_ + writing_bytes_ + tls_held_bytes(); }
  bool above_high_water() const { return queued_bytes() > kWriteQueueHighWater; }
  /// True while a borrowed view waits for flush() (the owner must flush before the bytes go).
  bool holds_borrowed() const { return borrowed_ > 0; }

  /// Closes now; queued writes are cancelled.
  void close();
  /// Flushes, waits for queued writes, half-closes (uv_shutdown), then closes.
  void shutdown_and_close();
  /// close() was called (the socket may still be closing).
  bool closing() const { return !handle_.open(); }
  /// libuv has finished closing the socket (on_stream_closed has been called).
  bool closed() const { return handle_.get() == nullptr; }

  /// "ip:port" of the peer, "" if unknown.
  std::string peer_address() const;

  /// Speaks TLS over this socket from now on (before any byte is read or appended). A client
  /// session's ClientHello goes out with the first flush() after connecting.
  void use_tls(std::unique_ptr<tls::TlsSession> session);
  /// The TLS session, nullptr on a plaintext stream.
  const tls::TlsSession* tls() const { return tls_.get(); }
  /// Bytes the owner read itself before this stream took over (what followed a PROXY header):
  /// they go the way bytes read from the socket go (through the TLS session, if any, to
  /// on_stream_read). `bytes` need only live during the call.
  void replay(codec::Bytes bytes);

 private:
  /// A run of outbound bytes: owned (copied or moved in) or borrowed from the caller.
  struct Segment {
    codec::FrameBuffer owned;
    codec::Bytes borrowed;
    size_t sent = 0;  ///< bytes of it already written (or sent before it was queued)
    bool is_borrowed = false;
    bool copies = false;  ///< holds append() copies: later copies go on its end
    codec::Bytes unsent() const { return (is_borrowed ? borrowed : owned.bytes()).subspan(sent); }
  };
  /// A uv_write in progress; owns its segments until after_write.
  struct WriteRequest {
    uv_write_t req;
    std::vector<Segment> segments;
    size_t bytes;
  };

  static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf);
  static void after_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
  static void after_write(uv_write_t* req, int status);
  static void after_shutdown(uv_shutdown_t* req, int status);
  static void on_closed(void* self);
  void begin_shutdown();
  /// Copies every borrowed segment (adjacent ones into one owned segment).
  void own_borrowed();
  /// Drops `n` written bytes from the front of the queue.
  void consume(size_t n);
  /// Empties the queue and gives its memory back.
  void drop_pending();
  /// Queues a copy of `bytes` as they are (no TLS): append() for plaintext streams, ciphertext.
  void append_copy(codec::Bytes bytes);
  // TLS filter (tcp_stream.cc, end): decrypt in the read path, encrypt before a flush.
  void read_tls(ssize_t nread, const uv_buf_t* buf);
  bool encrypt_tls();
  /// Runs `encrypt` with the session's ciphertext going straight onto the end of the write queue
  /// (room: bytes to reserve there first, 0 for none), after any output it already held.
  void encrypt_into_queue(size_t room, const std::function<void()>& encrypt);
  void move_tls_output();
  void send_tls_alert();
  /// The session failed: stop reading, send what it has for the peer (an alert) if asked, and
  /// tell the owner why.
  void fail_tls(bool send_alert);
  size_t tls_held_bytes() const;

  UvHandle<uv_tcp_t> handle_;
  /// Allocated by the half-close (shutdown_and_close), which most streams never do.
  std::unique_ptr<uv_shutdown_t> shutdown_req_;
  TcpStreamEvents& events_;
  const char* name_;
  std::vector<Segment> pending_;
  size_t pending_bytes_ = 0;
  size_t writing_bytes_ = 0;
  uint32_t borrowed_ = 0;  ///< borrowed segments in pending_
  bool connected_ = false;
  bool reading_ = false;
  bool was_above_high_water_ = false;
  bool shutdown_wanted_ = false;
  std::unique_ptr<tls::TlsSession> tls_;
};

}  // namespace kproxy::net
