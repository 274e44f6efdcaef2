// FrameReader: splits a TCP byte stream into Kafka's int32-size-prefixed frames.
//
// Bytes arrive in arbitrary pieces. A frame that lies wholly inside one piece is handed out as a
// view into that piece (no copy). A frame split across pieces is gathered in the reader's own
// FrameBuffer, which is released again once the frame is out, so an idle connection holds nothing.
// Gathering a large frame costs no copy either: once its size prefix is known, read_space() offers
// the room for the rest of the frame, the owner reads into it (TcpStream's read hook), and feed()
// recognises those bytes as already in place. The owner of a gathered frame may take its buffer
// (take_frame()) and hand it to the write side instead of copying it, or forward a large frame
// while it is still arriving (take_unstreamed(): cut-through) and send the rest once it is whole.
//
// Memory is bounded by what arrives, not by what the size prefix claims: the first reservation is
// the whole frame only up to kFrameUpfrontReserve; beyond that the buffer at most doubles each
// time the bytes already received fill it. A hostile prefix announcing 100 MiB therefore costs
// 4 MiB of untouched address space until the bytes really come, and the budget of partial-frame
// memory (codec/frame_memory_budget.h) is charged the bytes that came, not the room reserved.
//
// Read-through (issue #48): a frame of a few KiB to 64 KiB left unfinished at the end of a read
// (the usual case for 16 KiB Produce requests: a read ends wherever the socket's bytes end) is
// gathered in a 128 KiB buffer, and read_space() offers the whole rest of that buffer, not just
// the frame's missing bytes. The next read then lands behind the partial frame and brings the
// following frames with it: all of them are handed out as views into the reader's buffer, which
// stays as it is until the owner calls end_read() (after it has written or copied what it queued
// as views). end_read() moves the next unfinished frame to the front, or gives the buffer back when
// none is left. Against gathering from the loop's shared 64 KiB buffer this halves the reads and
// copies only the start of one frame per read instead of a whole frame.
//
// Framing errors (docs/protocol.md "Framing"): a negative size, a size above the configured maximum, or
// the first bytes of a TLS record on a plaintext port. Size 0 is legal at this layer (SASL).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "codec/frame_buffer.h"
#include "codec/frame_memory_budget.h"
#include "codec/reader.h"

namespace kproxy::codec {

/// Bytes of the size prefix in front of every frame.
inline constexpr size_t kFrameSizePrefix = 4;
/// A frame being gathered gets room for all of it at once up to this size; a larger one grows
/// by doubling as its bytes arrive (named cap on an attacker-controlled length).
inline constexpr size_t kFrameUpfrontReserve = 4 << 20;
/// read_space() offers room only when at least this much of the frame is still missing: shorter
/// rests are read with the following frames into the loop's shared buffer.
inline constexpr size_t kFrameDirectReadMin = 32 << 10;

/// When a frame left unfinished at the end of a read is gathered in a read-through buffer (see
/// above), and how large that buffer is. A buffer of 128 KiB is reused from the thread's block
/// cache (codec/frame_buffer.h), so entering read-through costs no allocation in steady state.
struct ReadThroughSizes {
  size_t min_frame = 4 << 10;   ///< smaller frames: the copy of their start is cheap, reads stay as they are
  size_t max_frame = 64 << 10;  ///< larger frames: read straight into a buffer of their own (read_space)
  size_t buffer = 128 << 10;
};

class FrameReader {
 public:
  /// `budget` (optional, outlives the reader) caps the memory of partial frames over many readers.
  explicit FrameReader(size_t max_frame_size, FrameMemoryBudget* budget = nullptr) : max_frame_size_(max_frame_size), budget_(budget) {}
  ~FrameReader() {
    if (budget_) budget_->refund(charged_);
  }
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  /// Feeds the next piece of the stream. Calls `on_frame(Bytes frame)` for every complete frame,
  /// size prefix included; the view is valid only during the call (unless its buffer is taken
  /// with take_frame()). `on_frame` returns false to stop (the rest of `data` is dropped).
  /// Returns false on a framing error (see error()). `data` may be bytes read into read_space().
  template <class OnFrame>
  bool feed(Bytes data, OnFrame&& on_frame);

  /// The end of a read: the owner has written or copied every view of it that it queued. A
  /// read-through buffer (above) moves its unfinished frame to the front, or is given back when
  /// none is left, so that an idle connection holds nothing. read_space() and feed() do the same
  /// when it was not called; calling it is what keeps an idle reader's memory at zero.
  void end_read();

  /// What of the bytes of one read the owner may queue as views (to be written or copied before
  /// end_read()): `data` itself when it was read into the loop's shared buffer; the reader's
  /// buffer up to the end of `data` when `data` was read into read-through room (frames are views
  /// into it); nothing when it was read into a large frame's own buffer (that frame is taken or
  /// copied). Call it before feed(data).
  Bytes read_piece(Bytes data) const {
    if (!is_read_space(data)) return data;
    return through_ ? Bytes(pending_.data(), pending_.size() + data.size()) : Bytes{};
  }

  /// Room to read into (then feed() the bytes read there), or empty when the loop's shared buffer
  /// should be used: the missing rest of a large frame, never longer than what it misses, or the
  /// rest of a read-through buffer. Valid until the next call of feed().
  std::span<uint8_t> read_space();

  /// True when `data` was read into read_space() (feed() will take it as in place): it lives in
  /// the reader's buffer (see read_piece() for how long).
  bool is_read_space(Bytes data) const {
    if (data.empty() || data.data() != pending_.data() + pending_.size()) return false;
    if (through_) return data.size() <= pending_.capacity() - pending_.size();
    return frame_total_ != 0 && data.size() <= frame_total_ - pending_.size();
  }
  /// True when `frame` (as passed to on_frame) is the frame gathered in the reader's buffer.
  bool holds(Bytes frame) const { return !frame.empty() && frame.data() == pending_.data() && frame.size() == pending_.size(); }
  /// Inside on_frame, for a frame that holds() is true of: gives its buffer away. The view passed
  /// to on_frame stays valid as long as the returned buffer lives.
  FrameBuffer take_frame() {
    frame_total_ = 0;
    through_ = false;
    start_ = 0;
    FrameBuffer taken = std::move(pending_);
    settle_budget();  // the buffer now belongs to the write side
    return taken;
  }

  /// The frame being gathered so far (size prefix included), empty when none is under way
  /// (between frames, or while its size prefix is incomplete).
  Bytes partial_frame() const { return frame_total_ != 0 ? pending_.bytes().subspan(start_) : Bytes{}; }
  /// Size of the frame being gathered (prefix included), 0 when partial_frame() is empty.
  size_t partial_frame_size() const { return frame_total_; }
  /// Cut-through: the bytes of the frame being gathered that arrived since the last call, for an
  /// owner that forwards a large frame while it arrives. They stay valid until the next feed().
  /// Once a frame's bytes have been taken so, streamed() says how many (until the frame is out:
  /// on_frame still sees the whole frame, and its owner sends only what was not streamed).
  Bytes take_unstreamed() {
    Bytes rest = partial_frame().subspan(streamed_);
    streamed_ = static_cast<uint32_t>(pending_.size() - start_);
    return rest;
  }
  /// Bytes of the current frame handed out by take_unstreamed() (0: it is not being streamed).
  size_t streamed() const { return streamed_; }

  /// Why the stream was refused, "" while it is fine.
  const std::string& error() const { return error_ ? *error_ : no_error(); }
  /// The refused stream started like a TLS handshake record (a TLS client on a plaintext port).
  bool looks_like_tls() const { return looks_like_tls_; }
  /// The stream was refused because its frame alone is larger than the budget of partial-frame
  /// memory could ever hold (the budget's limit was lowered below the frame limit by a reload).
  /// A full budget refuses nobody: the owner pauses reading instead (codec/frame_memory_budget.h).
  bool over_budget() const { return over_budget_; }
  /// Bytes held for an incomplete frame (what the budget is charged).
  size_t buffered() const { return pending_.size() - start_; }
  /// Bytes the frame being gathered still misses (0 when none is under way or its size prefix is
  /// not whole yet).
  size_t missing() const { return frame_total_ > buffered() ? frame_total_ - buffered() : 0; }
  /// Bytes of memory held for an incomplete frame (at least buffered()).
  size_t reserved() const { return pending_.capacity(); }
  /// Frames handed out so far.
  uint64_t frames() const { return frames_; }
  /// True while the reader gathers in a read-through buffer (above).
  bool reading_through() const { return through_; }

  /// The read-through sizes of every reader of the process (tests and fuzzing use small ones to
  /// exercise read-through with small frames). Not thread-safe: set it before readers run.
  static void set_read_through_sizes(ReadThroughSizes sizes) { read_through_ = sizes; }
  static ReadThroughSizes read_through_sizes() { return read_through_; }

 private:
  /// What protocol the 4 bytes at `p` (an oversized "size") start, or "" when they are not text.
  static std::string_view foreign_protocol(const uint8_t* p);
  static const std::string& no_error();
  void set_error(std::string why) { error_ = std::make_unique<std::string>(std::move(why)); }
  /// Checks the size prefix at p[0..3]; records an error and returns -1 when it is refused.
  int64_t frame_size(const uint8_t* p);
  /// Grows pending_ (by the policy above) so that `n` more bytes fit. False (error() says why)
  /// when the frame alone is larger than the budget's limit.
  bool make_room(size_t n);
  /// feed() for `n` bytes read into read-through room: hands out every frame now whole.
  template <class OnFrame>
  bool feed_through(size_t n, OnFrame& on_frame);
  /// Starts gathering the frame at the end of a read in a read-through buffer, when its size
  /// (frame_total_) asks for it and the budget of partial frames could hold the buffer.
  void maybe_read_through();
  /// Appends bytes of the frame being gathered. False when make_room() failed.
  bool gather(Bytes bytes) {
    if (!make_room(bytes.size())) return false;
    pending_.append(bytes);
    settle_budget();
    return true;
  }
  /// Frees pending_ and gives back what it was charged.
  void release_pending() {
    pending_.release();
    settle_budget();
  }
  /// Makes the budget's charge the bytes pending_ holds now: what arrived, not the capacity
  /// reserved ahead of them (untouched pages cost no memory).
  void settle_budget() {
    if (!budget_) return;
    size_t held = pending_.size() - start_;
    if (held > charged_) budget_->hold(held - charged_);
    else if (held < charged_) budget_->release(charged_ - held);
    charged_ = static_cast<uint32_t>(held);
  }

  static inline ReadThroughSizes read_through_{};

  // Sizes in 32 bits: a frame is at most 2 GiB + 4 (the size prefix is an int32), and every
  // connection has two readers (bench/proxy, idle memory per pair).
  size_t max_frame_size_;
  /// The frame being gathered (from its first byte); in read-through, the read's frames before it.
  FrameBuffer pending_;
  /// Why the stream was refused; null while it is fine (a refused stream is rare).
  std::unique_ptr<std::string> error_;
  FrameMemoryBudget* budget_;
  uint64_t frames_ = 0;
  /// Size of the frame being gathered, prefix included; 0 while its prefix is incomplete.
  uint32_t frame_total_ = 0;
  uint32_t charged_ = 0;   ///< bytes of pending_ charged to budget_ (settle_budget)
  uint32_t streamed_ = 0;  ///< see take_unstreamed()
  /// Where in pending_ the frame being gathered starts: 0, except in read-through between feed()
  /// and end_read() (the bytes before it are frames handed out as views).
  uint32_t start_ = 0;
  bool looks_like_tls_ = false;
  bool over_budget_ = false;
  bool through_ = false;  ///< pending_ is a read-through buffer
};

template <class OnFrame>
bool FrameReader::feed(Bytes data, OnFrame&& on_frame) {
  if (error_) return false;
  if (through_) {
    if (is_read_space(data)) return feed_through(data.size(), on_frame);
    end_read();
    through_ = false;  // bytes from elsewhere: gathered the plain way from here
  }
  size_t pos = 0;
  // First finish a frame started in an earlier piece.
  if (!pending_.empty()) {
    if (is_read_space(data)) {
      pending_.commit(data.size());  // read into read_space(): already in place
      settle_budget();
      pos = data.size();
    } else {
      if (pending_.size() < kFrameSizePrefix) {
        size_t take = std::min(kFrameSizePrefix - pending_.size(), data.size());
        if (!gather(data.first(take))) return false;
        pos = take;
        if (pending_.size() < kFrameSizePrefix) return true;
      }
      if (frame_total_ == 0) {
        int64_t size = frame_size(pending_.data());
        if (size < 0) return false;
        frame_total_ = static_cast<uint32_t>(kFrameSizePrefix + static_cast<size_t>(size));
      }
      size_t take = std::min(frame_total_ - pending_.size(), data.size() - pos);
      if (!gather(data.subspan(pos, take))) return false;
      pos += take;
    }
    if (pending_.size() < frame_total_) return true;
    ++frames_;
    bool go_on = on_frame(pending_.bytes());
    frame_total_ = 0;
    streamed_ = 0;
    release_pending();  // an idle connection keeps no buffer (no-op when the frame was taken)
    if (!go_on) return true;
  }
  // Then every frame that lies wholly inside this piece, as views.
  while (data.size() - pos >= kFrameSizePrefix) {
    int64_t size = frame_size(data.data() + pos);
    if (size < 0) return false;
    size_t total = kFrameSizePrefix + static_cast<size_t>(size);
    if (data.size() - pos < total) {
      frame_total_ = static_cast<uint32_t>(total);
      break;
    }
    ++frames_;
    if (!on_frame(data.subspan(pos, total))) return true;
    pos += total;
  }
  // Keep the start of the next frame.
  if (pos < data.size()) {
    maybe_read_through();
    if (!gather(data.subspan(pos))) return false;
  }
  return true;
}

template <class OnFrame>
bool FrameReader::feed_through(size_t n, OnFrame& on_frame) {
  pending_.commit(n);
  settle_budget();
  for (;;) {
    size_t held = pending_.size() - start_;
    if (frame_total_ == 0) {
      if (held < kFrameSizePrefix) break;
      int64_t size = frame_size(pending_.data() + start_);
      if (size < 0) return false;
      frame_total_ = static_cast<uint32_t>(kFrameSizePrefix + static_cast<size_t>(size));
    }
    if (held < frame_total_) break;
    ++frames_;
    size_t total = frame_total_;
    bool go_on = on_frame(Bytes(pending_.data() + start_, total));
    frame_total_ = 0;
    streamed_ = 0;
    if (!through_) return true;  // the frame was the whole buffer, and was taken
    start_ += static_cast<uint32_t>(total);
    if (!go_on) {
      start_ = static_cast<uint32_t>(pending_.size());  // the rest of the read is dropped
      break;
    }
  }
  settle_budget();
  return true;
}

}  // namespace kproxy::codec
