#include "proxy/net/tcp_stream.h"

#include <algorithm>
#include <array>
#include <limits>

#include "proxy/tls/tls_session.h"

namespace kproxy::net {

namespace {
// Every read on a loop thread lands in this buffer unless the owner offers room of its own: read
// callbacks consume their bytes before returning (FrameReader copies only the start of an
// incomplete frame; views queued with append_borrowed are flushed before the callback returns),
// so one buffer per thread suffices and an idle connection holds no read buffer at all.
constexpr size_t kReadBufferSize = 64 << 10;
// Plaintext at least this large has room made for all its ciphertext in the queue at once.
constexpr size_t kEncryptReserveMin = 32 << 10;

// The uv_buf_t list of a queue, rebuilt for each write (uv_write copies the list).
std::vector<uv_buf_t>& buffers_of(const auto& segments) {
  static thread_local std::vector<uv_buf_t> bufs;
  bufs.clear();
  for (const auto& s : segments) {
    codec::Bytes b = s.unsent();
    bufs.push_back(uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(b.data())), static_cast<unsigned>(b.size())));
  }
  return bufs;
}
}  // namespace

TcpStream::TcpStream(uv_loop_t* loop, TcpStreamEvents& events, const char* name) : events_(events), name_(name) {
  handle_.init(loop, this, uv_tcp_init);
}

TcpStream::~TcpStream() = default;

void TcpStream::on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
  auto* self = static_cast<TcpStream*>(h->data);
  std::span<uint8_t> room = self->tls_ ? std::span<uint8_t>() : self->events_.read_space(*self);
  if (!room.empty()) {
    size_t len = std::min<size_t>(room.size(), std::numeric_limits<unsigned>::max());
    *buf = uv_buf_init(reinterpret_cast<char*>(room.data()), static_cast<unsigned>(len));
    return;
  }
  static thread_local std::array<char, kReadBufferSize> buffer;
  *buf = uv_buf_init(buffer.data(), static_cast<unsigned>(buffer.size()));
}

void TcpStream::start_reading() {
  if (reading_ || closing()) return;
  if (uv_read_start(stream(), on_alloc, after_read) == 0) reading_ = true;
}

void TcpStream::stop_reading() {
  if (!reading_) return;
  uv_read_stop(stream());
  reading_ = false;
}

void TcpStream::after_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<TcpStream*>(s->data);
  if (self->closing()) return;
  if (self->tls_) {
    self->read_tls(nread, buf);
    return;
  }
  if (nread > 0) {
    self->events_.on_stream_read(*self, codec::Bytes(reinterpret_cast<const uint8_t*>(buf->base), static_cast<size_t>(nread)));
  } else if (nread < 0) {
    self->stop_reading();
    self->events_.on_stream_error(*self, static_cast<int>(nread), "read");
  }
}

void TcpStream::append(codec::Bytes bytes) {
  if (tls_) {
    if (tls_->holds_send(bytes.size())) {
      tls_->send(bytes);  // held, encrypted at the next flush()
      return;
    }
    // A failure surfaces at the next flush(). Room for a large frame's ciphertext at once (TLS
    // 1.3 adds 22 bytes per 16 KiB record): regrowing record by record made 1 MiB frames
    // page-fault.
    size_t room = bytes.size() >= kEncryptReserveMin ? bytes.size() + (bytes.size() >> 14) * 32 + 64 : 0;
    encrypt_into_queue(room, [&] { tls_->send(bytes); });
    return;
  }
  append_copy(bytes);
}

void TcpStream::encrypt_into_queue(size_t room, const std::function<void()>& encrypt) {
  move_tls_output();  // ciphertext made before (handshake messages) goes first
  if (pending_.empty() || !pending_.back().copies) {
    Segment s;
    s.copies = true;
    pending_.push_back(std::move(s));
  }
  codec::FrameBuffer& queue = pending_.back().owned;
  size_t before = queue.size();
  if (room > 0) queue.reserve(before + room);
  tls_->set_output_target(&queue);
  encrypt();
  tls_->set_output_target(nullptr);
  pending_bytes_ += queue.size() - before;
  if (queue.empty()) pending_.pop_back();  // the segment made above, and nothing was encrypted
}

void TcpStream::append_copy(codec::Bytes bytes) {
  if (bytes.empty()) return;
  if (!pending_.empty() && pending_.back().copies) {
    pending_.back().owned.append(bytes);
  } else {
    Segment s;
    s.copies = true;
    s.owned.append(bytes);
    pending_.push_back(std::move(s));
  }
  pending_bytes_ += bytes.size();
}

void TcpStream::append(codec::FrameBuffer&& buffer, size_t already_sent) {
  already_sent = std::min(already_sent, buffer.size());
  if (tls_) {
    append(buffer.bytes().subspan(already_sent));  // encrypted from the buffer; it goes when this returns
    return;
  }
  if (buffer.size() == already_sent) return;
  pending_bytes_ += buffer.size() - already_sent;
  Segment s;
  s.owned = std::move(buffer);
  s.sent = already_sent;
  pending_.push_back(std::move(s));
}

void TcpStream::append_borrowed(codec::Bytes bytes) {
  if (tls_) {
    append(bytes);  // the session keeps its own copy of the plaintext
    return;
  }
  if (bytes.empty()) return;
  pending_bytes_ += bytes.size();
  // Frames forwarded from one read lie back to back: one segment for all of them.
  if (!pending_.empty() && pending_.back().is_borrowed &&
      pending_.back().borrowed.data() + pending_.back().borrowed.size() == bytes.data()) {
    Segment& last = pending_.back();
    last.borrowed = codec::Bytes(last.borrowed.data(), last.borrowed.size() + bytes.size());
    return;
  }
  Segment s;
  s.borrowed = bytes;
  s.is_borrowed = true;
  pending_.push_back(std::move(s));
  ++borrowed_;
}

void TcpStream::own_borrowed() {
  if (borrowed_ == 0) return;
  std::vector<Segment> out;
  out.reserve(pending_.size());
  for (Segment& s : pending_) {
    if (!s.is_borrowed) {
      out.push_back(std::move(s));
      continue;
    }
    if (out.empty() || !out.back().copies) {
      Segment c;
      c.copies = true;
      c.owned.reserve(s.unsent().size());
      out.push_back(std::move(c));
    }
    out.back().owned.append(s.unsent());
  }
  pending_.swap(out);
  borrowed_ = 0;
}

void TcpStream::consume(size_t n) {
  pending_bytes_ -= n;
  size_t done = 0;
  while (n > 0) {
    Segment& s = pending_[done];
    size_t left = s.unsent().size();
    if (n < left) {
      s.sent += n;
      break;
    }
    n -= left;
    if (s.is_borrowed) --borrowed_;
    ++done;
  }
  if (done == pending_.size()) {
    drop_pending();
  } else {
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(done));
  }
}

void TcpStream::drop_pending() {
  std::vector<Segment>().swap(pending_);  // an idle stream holds no memory
  pending_bytes_ = 0;
  borrowed_ = 0;
  if (tls_ && writing_bytes_ == 0 && tls_->held_plaintext() == 0) tls_->release_idle_memory();  // nor its TLS session
}

bool TcpStream::flush() {
  if (tls_ && !closing() && !encrypt_tls()) return false;
  if (closing()) {
    drop_pending();
    return true;
  }
  if (pending_.empty()) return true;
  if (!connected_) {
    own_borrowed();  // sent once connected; the borrowed bytes will be gone by then
    return true;
  }
  if (writing_bytes_ == 0) {
    std::vector<uv_buf_t>& bufs = buffers_of(pending_);
    int n = uv_try_write(stream(), bufs.data(), static_cast<unsigned>(bufs.size()));
    if (n == UV_EAGAIN || n == UV_ENOSYS) n = 0;
    if (n < 0) {
      drop_pending();
      events_.on_stream_error(*this, n, "write");
      return false;
    }
    consume(static_cast<size_t>(n));
    if (pending_.empty()) {
      if (shutdown_wanted_) begin_shutdown();
      return true;
    }
  }
  own_borrowed();
  auto* w = new WriteRequest{uv_write_t{}, std::move(pending_), pending_bytes_};
  drop_pending();
  writing_bytes_ += w->bytes;
  std::vector<uv_buf_t>& bufs = buffers_of(w->segments);
  w->req.data = w;
  int rc = uv_write(&w->req, stream(), bufs.data(), static_cast<unsigned>(bufs.size()), after_write);
  if (rc < 0) {
    writing_bytes_ -= w->bytes;
    delete w;
    events_.on_stream_error(*this, rc, "write");
    return false;
  }
  if (above_high_water()) was_above_high_water_ = true;
  return true;
}

void TcpStream::after_write(uv_write_t* req, int status) {
  auto* w = static_cast<WriteRequest*>(req->data);
  auto* self = static_cast<TcpStream*>(req->handle->data);  // nullptr once the stream is gone (UvHandle)
  size_t bytes = w->bytes;
  delete w;
  if (self == nullptr) return;
  self->writing_bytes_ -= bytes;
  if (self->closing()) return;
  if (status < 0) {
    self->events_.on_stream_error(*self, status, "write");
    return;
  }
  if (self->was_above_high_water_ && self->queued_bytes() < kWriteQueueLowWater) {
    self->was_above_high_water_ = false;
    self->events_.on_stream_writable(*self);
    if (self->closing()) return;
  }
  if (self->shutdown_wanted_ && self->queued_bytes() == 0) self->begin_shutdown();
}

void TcpStream::shutdown_and_close() {
  if (closing()) return;
  shutdown_wanted_ = true;
  stop_reading();
  if (tls_) {
    tls_->close_notify();
    move_tls_output();
  }
  if (!connected_) {
    close();
    return;
  }
  if (!flush()) return;
  if (queued_bytes() == 0) begin_shutdown();
}

void TcpStream::begin_shutdown() {
  if (closing() || shutdown_req_) return;
  // Lives until the stream is destroyed: libuv calls after_shutdown (with UV_ECANCELED if the
  // socket closes first) before the stream's close callback.
  shutdown_req_ = std::make_unique<uv_shutdown_t>();
  shutdown_req_->data = this;
  if (uv_shutdown(shutdown_req_.get(), stream(), after_shutdown) < 0) close();
}

void TcpStream::after_shutdown(uv_shutdown_t* req, int) { static_cast<TcpStream*>(req->data)->close(); }

void TcpStream::close() {
  if (closing()) return;
  reading_ = false;
  drop_pending();  // queued writes are cancelled; their requests own their own bytes
  handle_.close(on_closed);
}

void TcpStream::on_closed(void* self) {
  auto* stream = static_cast<TcpStream*>(self);
  stream->events_.on_stream_closed(*stream);
}

std::string TcpStream::peer_address() const {
  sockaddr_storage addr{};
  int len = sizeof(addr);
  if (handle_.get() == nullptr) return "";
  if (uv_tcp_getpeername(handle_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char ip[64] = {0};
  int port = 0;
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    uv_ip4_name(a, ip, sizeof(ip));
    port = ntohs(a->sin_port);
    return std::string(ip) + ":" + std::to_string(port);
  }
  if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    uv_ip6_name(a, ip, sizeof(ip));
    port = ntohs(a->sin6_port);
    std::string out = "[";  // appended piecewise: GCC 12 -O3 warns (-Wrestrict) on the operator+ chain
    out += ip;
    out += "]:";
    out += std::to_string(port);
    return out;
  }
  return "";
}

// ---- TLS filter ----------------------------------------------------------------------------

void TcpStream::use_tls(std::unique_ptr<tls::TlsSession> session) {
  tls_ = std::move(session);
  tls_->start();  // a failure to write the ClientHello surfaces at the first flush()
  move_tls_output();
}

void TcpStream::replay(codec::Bytes bytes) {
  if (bytes.empty() || closing()) return;
  if (!tls_) {
    events_.on_stream_read(*this, bytes);
    return;
  }
  uv_buf_t buf = uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(bytes.data())), static_cast<unsigned>(bytes.size()));
  read_tls(static_cast<ssize_t>(bytes.size()), &buf);
}

size_t TcpStream::tls_held_bytes() const { return tls_ ? tls_->held_plaintext() : 0; }

void TcpStream::move_tls_output() {
  tls_->take_output([this](codec::Bytes ciphertext) { append_copy(ciphertext); });
}

void TcpStream::send_tls_alert() {
  // Best effort, since the owner closes the stream next: the alert tells the peer why the
  // handshake failed ("unknown ca" in its log rather than a bare disconnect).
  if (!connected_ || pending_.empty() || writing_bytes_ > 0) return;
  std::vector<uv_buf_t>& bufs = buffers_of(pending_);
  (void)uv_try_write(stream(), bufs.data(), static_cast<unsigned>(bufs.size()));
  drop_pending();
}

void TcpStream::fail_tls(bool send_alert) {
  stop_reading();
  if (send_alert) send_tls_alert();
  events_.on_stream_tls_failed(*this, tls_->failure().message);
}

bool TcpStream::encrypt_tls() {
  if (tls_->failed()) {
    fail_tls(/*send_alert=*/false);
    return false;
  }
  auto status = tls::TlsSession::Status::kOk;
  if (tls_->held_plaintext() == 0) {
    move_tls_output();  // nothing to encrypt: no room to set up
  } else {
    encrypt_into_queue(0, [&] { status = tls_->encrypt(); });
  }
  if (status == tls::TlsSession::Status::kFailed) {
    fail_tls(/*send_alert=*/true);
    return false;
  }
  return true;
}

void TcpStream::read_tls(ssize_t nread, const uv_buf_t* buf) {
  if (nread < 0) {
    stop_reading();
    // A close before the handshake is a TLS failure once the handshake began: we sent a
    // ClientHello, or the client sent one. A client that connects and closes without a byte (a
    // TCP health check) just closed.
    if (nread == UV_EOF && !tls_->established() && !tls_->failed() && (tls_->is_client() || tls_->received_any())) {
      events_.on_stream_tls_failed(*this, tls::closed_during_handshake(tls_->peer_role(), tls_->is_client()).message);
    } else {
      events_.on_stream_error(*this, static_cast<int>(nread), "read");
    }
    return;
  }
  if (nread == 0) return;
  codec::Bytes ciphertext(reinterpret_cast<const uint8_t*>(buf->base), static_cast<size_t>(nread));
  auto status = tls_->receive(
      ciphertext,
      [this](codec::Bytes plaintext) {
        events_.on_stream_read(*this, plaintext);
        return !closing();
      },
      [this] { return events_.read_space(*this); });  // the rest of a large frame is decrypted into its buffer
  if (closing()) return;
  move_tls_output();  // handshake messages, session tickets, an alert
  if (status == tls::TlsSession::Status::kFailed) {
    fail_tls(/*send_alert=*/true);
    return;
  }
  if (tls_->take_just_established()) {
    events_.on_stream_tls_established(*this);
    if (closing()) return;
  }
  if (!flush()) return;
  // A read that left nothing to send (a session ticket, a request still incomplete) also leaves
  // the session idle: flush() did not drain a queue, so drop_pending() did not release it.
  if (queued_bytes() == 0) tls_->release_idle_memory();
  if (status == tls::TlsSession::Status::kPeerClosed) {
    stop_reading();
    events_.on_stream_error(*this, UV_EOF, "read");
  }
}

}  // namespace kproxy::net
