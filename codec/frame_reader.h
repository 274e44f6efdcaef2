// FrameReader: splits a TCP byte stream into Kafka's int32-size-prefixed frames.
//
// Bytes arrive in arbitrary pieces. A frame that lies wholly inside one piece is handed out as a
// view into that piece (no copy); only a frame split across pieces is gathered in the reader's
// own buffer, which is released again once the frame is out, so an idle connection holds nothing.
//
// Framing errors (PROTOCOL.md 5, 6): a negative size, a size above the configured maximum, or
// the first bytes of a TLS record on a plaintext port. Size 0 is legal at this layer (SASL).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codec/reader.h"

namespace kproxy::codec {

/// Bytes of the size prefix in front of every frame.
inline constexpr size_t kFrameSizePrefix = 4;

class FrameReader {
 public:
  explicit FrameReader(size_t max_frame_size) : max_frame_size_(max_frame_size) {}

  /// Feeds the next piece of the stream. Calls `on_frame(Bytes frame)` for every complete frame,
  /// size prefix included; the view is valid only during the call. `on_frame` returns false to
  /// stop (the rest of `data` is dropped). Returns false on a framing error (see error()).
  template <class OnFrame>
  bool feed(Bytes data, OnFrame&& on_frame);

  /// Why the stream was refused, "" while it is fine.
  const std::string& error() const { return error_; }
  /// The refused stream started like a TLS handshake record (a TLS client on a plaintext port).
  bool looks_like_tls() const { return looks_like_tls_; }
  /// Bytes held for an incomplete frame.
  size_t buffered() const { return pending_.size(); }
  /// Frames handed out so far.
  uint64_t frames() const { return frames_; }
  size_t max_frame_size() const { return max_frame_size_; }
  void set_max_frame_size(size_t n) { max_frame_size_ = n; }

 private:
  /// Checks the size prefix at p[0..3]; records an error and returns -1 when it is refused.
  int64_t frame_size(const uint8_t* p);

  size_t max_frame_size_;
  std::vector<uint8_t> pending_;
  std::string error_;
  bool looks_like_tls_ = false;
  uint64_t frames_ = 0;
};

template <class OnFrame>
bool FrameReader::feed(Bytes data, OnFrame&& on_frame) {
  if (!error_.empty()) return false;
  size_t pos = 0;
  // First finish a frame started in an earlier piece.
  if (!pending_.empty()) {
    if (pending_.size() < kFrameSizePrefix) {
      size_t take = std::min(kFrameSizePrefix - pending_.size(), data.size());
      pending_.insert(pending_.end(), data.begin(), data.begin() + static_cast<ptrdiff_t>(take));
      pos = take;
      if (pending_.size() < kFrameSizePrefix) return true;
    }
    int64_t size = frame_size(pending_.data());
    if (size < 0) return false;
    size_t total = kFrameSizePrefix + static_cast<size_t>(size);
    size_t take = std::min(total - pending_.size(), data.size() - pos);
    pending_.insert(pending_.end(), data.begin() + static_cast<ptrdiff_t>(pos), data.begin() + static_cast<ptrdiff_t>(pos + take));
    pos += take;
    if (pending_.size() < total) return true;
    ++frames_;
    bool go_on = on_frame(Bytes(pending_.data(), pending_.size()));
    std::vector<uint8_t>().swap(pending_);  // release: an idle connection keeps no buffer
    if (!go_on) return true;
  }
  // Then every frame that lies wholly inside this piece, as views.
  while (data.size() - pos >= kFrameSizePrefix) {
    int64_t size = frame_size(data.data() + pos);
    if (size < 0) return false;
    size_t total = kFrameSizePrefix + static_cast<size_t>(size);
    if (data.size() - pos < total) break;
    ++frames_;
    if (!on_frame(data.subspan(pos, total))) return true;
    pos += total;
  }
  // Keep the start of the next frame.
  if (pos < data.size()) {
    pending_.assign(data.begin() + static_cast<ptrdiff_t>(pos), data.end());
  }
  return true;
}

}  // namespace kproxy::codec
