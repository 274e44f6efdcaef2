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

}  // namespace kproxy::codec
