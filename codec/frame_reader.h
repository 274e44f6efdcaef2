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

  /// Room to read the missing rest of the frame being gathered straight into its buffer (then
  /// feed() the bytes read there), or empty when no large frame is under way. Valid until the
  /// next call of feed(). Never longer than what the current frame still misses.
  std::span<uint8_t> read_space();

  /// True when `data` was read into read_space() (feed() will take it as in place): it lives in
  /// the reader's buffer, which is released once its frame is handed out, not taken.
  bool is_read_space(Bytes data) const {
    return frame_total_ != 0 && !data.empty() && data.data() == pending_.data() + pending_.size() &&
           data.size() <= frame_total_ - pending_.size();
  }
  /// True when `frame` (as passed to on_frame) is the frame gathered in the reader's buffer.
  bool holds(Bytes frame) const { return !frame.empty() && frame.data() == pending_.data() && frame.size() == pending_.size(); }
  /// Inside on_frame, for a frame that holds() is true of: gives its buffer away. The view passed
  /// to on_frame stays valid as long as the returned buffer lives.
  FrameBuffer take_frame() {
    frame_total_ = 0;
    FrameBuffer taken = std::move(pending_);
    settle_budget();  // the buffer now belongs to the write side
    return taken;
  }

  /// The frame being gathered so far (size prefix included), empty when none is under way
  /// (between frames, or while its size prefix is incomplete).
  Bytes partial_frame() const { return frame_total_ != 0 ? pending_.bytes() : Bytes{}; }
  /// Size of the frame being gathered (prefix included), 0 when partial_frame() is empty.
  size_t partial_frame_size() const { return frame_total_; }
  /// Cut-through: the bytes of the frame being gathered that arrived since the last call, for an
  /// owner that forwards a large frame while it arrives. They stay valid until the next feed().
  /// Once a frame's bytes have been taken so, streamed() says how many (until the frame is out:
  /// on_frame still sees the whole frame, and its owner sends only what was not streamed).
  Bytes take_unstreamed() {
    Bytes rest = partial_frame().subspan(streamed_);
    streamed_ = static_cast<uint32_t>(pending_.size());
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
  size_t buffered() const { return pending_.size(); }
  /// Bytes the frame being gathered still misses (0 when none is under way or its size prefix is
  /// not whole yet).
  size_t missing() const { return frame_total_ > pending_.size() ? frame_total_ - pending_.size() : 0; }
  /// Bytes of memory held for an incomplete frame (at least buffered()).
  size_t reserved() const { return pending_.capacity(); }
  /// Frames handed out so far.
  uint64_t frames() const { return frames_; }

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
    size_t held = pending_.size();
    if (held > charged_) budget_->hold(held - charged_);
    else if (held < charged_) budget_->release(charged_ - held);
    charged_ = held;
  }

  size_t max_frame_size_;
  FrameBuffer pending_;
  /// Size of the frame being gathered, prefix included; 0 while its prefix is incomplete.
  size_t frame_total_ = 0;
  /// Why the stream was refused; null while it is fine (a refused stream is rare, and every
  /// connection has two readers: bench/proxy, idle memory per pair).
  std::unique_ptr<std::string> error_;
  FrameMemoryBudget* budget_;
  size_t charged_ = 0;  ///< bytes of pending_ charged to budget_ (settle_budget)
  bool looks_like_tls_ = false;
  bool over_budget_ = false;
  uint32_t streamed_ = 0;  ///< see take_unstreamed() (frames are at most 2 GiB: the size prefix is an int32)
  uint64_t frames_ = 0;
};

template <class OnFrame>
bool FrameReader::feed(Bytes data, OnFrame&& on_frame) {
  if (error_) return false;
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
        frame_total_ = kFrameSizePrefix + static_cast<size_t>(size);
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
      frame_total_ = total;
      break;
    }
    ++frames_;
    if (!on_frame(data.subspan(pos, total))) return true;
    pos += total;
  }
  // Keep the start of the next frame.
  if (pos < data.size() && !gather(data.subspan(pos))) return false;
  return true;
}

}  // namespace kproxy::codec
