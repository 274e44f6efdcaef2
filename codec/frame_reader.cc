#include "codec/frame_reader.h"

namespace kproxy::codec {

int64_t FrameReader::frame_size(const uint8_t* p) {
  // A TLS handshake record starts 0x16 0x03 (content type 22, major version 3): read as a size
  // that is about 369 MB, so without this check it would look like an oversized frame.
  if (p[0] == 0x16 && p[1] == 0x03 && p[2] <= 0x04) {
    looks_like_tls_ = true;
    error_ = "TLS handshake bytes on a plaintext port (a TLS client connected without TLS configured)";
    return -1;
  }
  int32_t size = static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]});
  if (size < 0) {
    error_ = "negative frame size " + std::to_string(size);
    return -1;
  }
  if (static_cast<size_t>(size) > max_frame_size_) {
    error_ = "frame size " + std::to_string(size) + " exceeds the limit of " + std::to_string(max_frame_size_) + " bytes";
    return -1;
  }
  return size;
}

void FrameReader::make_room(size_t n) {
  size_t need = pending_.size() + n;
  if (need <= pending_.capacity()) return;
  if (frame_total_ == 0) {
    // Only the size prefix (or less) so far: room for the prefix.
    pending_.reserve(std::max(need, kFrameSizePrefix));
    return;
  }
  // The whole frame when it is small enough; else double what the received bytes filled.
  size_t upfront = std::min(frame_total_, kFrameUpfrontReserve);
  size_t doubled = std::min(frame_total_, 2 * pending_.capacity());
  pending_.reserve(std::max({need, upfront, doubled}));
}

std::span<uint8_t> FrameReader::read_space() {
  if (!error_.empty() || frame_total_ == 0 || pending_.empty()) return {};
  size_t missing = frame_total_ - pending_.size();
  if (missing < kFrameDirectReadMin) return {};
  // Grow only once the bytes received have (nearly) filled the room: memory follows the bytes
  // that really arrive, not the size prefix.
  if (pending_.capacity() - pending_.size() < kFrameDirectReadMin) make_room(std::min(missing, kFrameUpfrontReserve));
  std::span<uint8_t> room = pending_.spare();
  return room.first(std::min(room.size(), missing));
}

}  // namespace kproxy::codec
