#include "codec/frame_reader.h"

#include <algorithm>
#include <string_view>

namespace kproxy::codec {

const std::string& FrameReader::no_error() {
  static const std::string none;
  return none;
}

std::string_view FrameReader::foreign_protocol(const uint8_t* p) {
  std::string_view start(reinterpret_cast<const char*>(p), kFrameSizePrefix);
  for (std::string_view method : {"GET ", "POST", "PUT ", "HEAD", "DELE", "OPTI", "PATC", "CONN", "TRAC", "PRI "}) {
    if (start == method) return "HTTP request bytes on a Kafka port (an HTTP client or health check connected to a Kafka listener)";
  }
  if (start == "HTTP") return "HTTP response bytes where a Kafka frame was expected (the peer is an HTTP server)";
  if (start == "SSH-") return "SSH bytes where a Kafka frame was expected";
  bool text = std::all_of(start.begin(), start.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  if (text) return "text bytes where a Kafka frame was expected (not the Kafka protocol)";
  return {};
}

int64_t FrameReader::frame_size(const uint8_t* p) {
  // A TLS handshake record starts 0x16 0x03 (content type 22, major version 3): read as a size
  // that is about 369 MB, so without this check it would look like an oversized frame.
  if (p[0] == 0x16 && p[1] == 0x03 && p[2] <= 0x04) {
    looks_like_tls_ = true;
    set_error("TLS handshake bytes on a plaintext port (a TLS client connected without TLS configured)");
    return -1;
  }
  int32_t size = static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]});
  if (size < 0) {
    set_error("negative frame size " + std::to_string(size));
    return -1;
  }
  if (static_cast<size_t>(size) > max_frame_size_) {
    std::string why = "frame size " + std::to_string(size) + " exceeds the limit of " + std::to_string(max_frame_size_) + " bytes";
    // Text where a size prefix belongs is another protocol: say which, not just "1195725856".
    if (std::string_view what = foreign_protocol(p); !what.empty()) why = std::string(what) + " (" + why + ")";
    set_error(std::move(why));
    return -1;
  }
  return size;
}

bool FrameReader::make_room(size_t n) {
  size_t need = pending_.size() + n;
  if (need <= pending_.capacity()) return true;
  size_t want;
  if (frame_total_ == 0) {
    want = std::max(need, kFrameSizePrefix);  // only the size prefix (or less) so far: room for the prefix
  } else {
    // The whole frame when it is small enough; else double what the received bytes filled.
    size_t total = frame_total_;
    size_t upfront = std::min(total, kFrameUpfrontReserve);
    size_t doubled = std::min(total, 2 * pending_.capacity());
    want = std::max({need, upfront, doubled});
  }
  // Only a frame larger than the whole budget is refused: it could never be held. A budget that
  // is merely full refuses nobody (its owner pauses the largest holders instead).
  size_t limit = budget_ ? budget_->limit() : 0;
  if (limit != 0 && size_t{frame_total_} > limit) {
    over_budget_ = true;
    set_error("a " + std::to_string(frame_total_) + "-byte frame is larger than all partial frames may hold together (" +
              std::to_string(limit) + " bytes, limits.max_buffered_frame_bytes)");
    return false;
  }
  pending_.reserve(want);
  return true;
}

void FrameReader::end_read() {
  if (!through_) return;
  if (start_ == pending_.size()) {  // every frame of the buffer is out
    start_ = 0;
    through_ = false;
    release_pending();
    return;
  }
  if (start_ != 0) {
    pending_.drop_front(start_);
    start_ = 0;
  }
  // A large frame began at the end of the read: its rest is read into a buffer sized for it.
  if (frame_total_ > read_through_.max_frame) through_ = false;
}

void FrameReader::maybe_read_through() {
  const ReadThroughSizes& rt = read_through_;
  if (frame_total_ < rt.min_frame || frame_total_ > rt.max_frame) return;
  // Within max_buffered_frame_bytes: a budget lowered below the buffer gathers frames the plain way.
  if (budget_ != nullptr && budget_->limit() != 0 && rt.buffer > budget_->limit()) return;
  pending_.reserve(rt.buffer);
  through_ = true;
}

std::span<uint8_t> FrameReader::read_space() {
  if (error_) return {};
  if (through_) {
    end_read();
    if (through_) return pending_.spare();
  }
  if (frame_total_ == 0 || pending_.empty()) return {};
  size_t missing = frame_total_ - pending_.size();
  if (missing < kFrameDirectReadMin) return {};
  // Grow only once the bytes received have (nearly) filled the room: memory follows the bytes
  // that really arrive, not the size prefix.
  // Refused by the budget: the room stays as it is, and the next feed() reports the refusal.
  if (pending_.capacity() - pending_.size() < kFrameDirectReadMin) (void)make_room(std::min(missing, kFrameUpfrontReserve));
  std::span<uint8_t> room = pending_.spare();
  return room.first(std::min(room.size(), missing));
}

}  // namespace kproxy::codec
