// Fuzz target: codec::FrameReader fed the same stream in arbitrary pieces.
//
// Input: [limit selector][piece count n] then n piece lengths (one byte each, 0-255), then the
// stream bytes. The stream is cut at the given lengths (the rest is one last piece) and fed piece
// by piece; a reference splitter written here walks the whole stream in one pass. Frames handed
// out (bytes and count), the error state, the TLS flag and the bytes left buffered must agree.
// A second FrameReader fed the whole stream in one piece must agree too. The selector also picks
// a piece after which on_frame returns false once, to check that stopping drops exactly the rest
// of that piece. Another bit reads the pieces the way a socket does (TcpStream): into the room
// read_space() offers when it offers some (a large frame's own buffer, or a read-through buffer),
// with read-through sizes small enough for a fuzz input to cross (frames of 8 to 64 bytes, a
// buffer of 128), and end_read() after every read or only sometimes.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "codec/frame_reader.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;

namespace {

struct Reference {
  std::vector<std::vector<uint8_t>> frames;
  bool error = false;
  bool tls = false;
  size_t leftover = 0;  // bytes of an incomplete last frame
};

Reference split_once(const uint8_t* p, size_t n, size_t max_frame) {
  Reference ref;
  size_t pos = 0;
  while (n - pos >= 4) {
    const uint8_t* q = p + pos;
    if (q[0] == 0x16 && q[1] == 0x03 && q[2] <= 0x04) {
      ref.error = ref.tls = true;
      return ref;
    }
    uint32_t u = (uint32_t{q[0]} << 24) | (uint32_t{q[1]} << 16) | (uint32_t{q[2]} << 8) | uint32_t{q[3]};
    if (u & 0x80000000u || u > max_frame) {
      ref.error = true;
      return ref;
    }
    if (n - pos - 4 < u) break;
    ref.frames.emplace_back(q, q + 4 + u);
    pos += 4 + u;
  }
  ref.leftover = n - pos;
  return ref;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t sel = fuzz::take_byte(data, size);
  static const size_t kLimits[4] = {0, 16, 300, 100u << 20};
  size_t max_frame = kLimits[sel & 3];
  bool socket = (sel & 8) != 0;
  bool stop_once = (sel & 4) != 0 && !socket;
  bool end_reads = (sel & 16) != 0;
  codec::FrameReader::set_read_through_sizes(socket ? codec::ReadThroughSizes{.min_frame = 8, .max_frame = 64, .buffer = 128}
                                                    : codec::ReadThroughSizes{});
  size_t pieces = fuzz::take_byte(data, size);
  std::vector<size_t> lengths;
  for (size_t i = 0; i < pieces && size > 0; ++i) lengths.push_back(fuzz::take_byte(data, size));
  const uint8_t* stream = data;
  size_t stream_size = size;

  Reference ref = split_once(stream, stream_size, max_frame);

  // One piece: must equal the reference exactly.
  {
    codec::FrameReader fr(max_frame);
    std::vector<std::vector<uint8_t>> got;
    bool ok = fr.feed(codec::Bytes(stream, stream_size), [&](codec::Bytes f) {
      got.emplace_back(f.begin(), f.end());
      return true;
    });
    fuzz::check(ok == !ref.error, "one piece: feed() result differs from the reference");
    fuzz::check(got == ref.frames, "one piece: frames differ from the reference");
    fuzz::check(fr.looks_like_tls() == ref.tls, "one piece: TLS flag differs");
    fuzz::check(fr.frames() == ref.frames.size(), "one piece: frames() count differs");
    if (!ref.error) fuzz::check(fr.buffered() == ref.leftover, "one piece: buffered() differs from the leftover");
    fuzz::check(fr.error().empty() == !ref.error, "one piece: error() state differs");
  }

  // Arbitrary pieces.
  codec::FrameReader fr(max_frame);
  std::vector<std::vector<uint8_t>> got;
  size_t pos = 0;
  bool failed = false;
  bool stopped = false;
  size_t dropped_before = 0;  // when stopping: frames of the reference that were dropped are skipped
  for (size_t i = 0; i <= lengths.size() && !failed; ++i) {
    size_t len = i < lengths.size() ? std::min(lengths[i], stream_size - pos) : stream_size - pos;
    bool stop_here = stop_once && !stopped && i == lengths.size() / 2;
    size_t frames_before = got.size();
    auto on_frame = [&](codec::Bytes f) {
      got.emplace_back(f.begin(), f.end());
      return !stop_here;
    };
    bool ok = true;
    if (socket) {
      // The piece is what the kernel has: each read takes what fits in the room offered.
      for (size_t done = 0; done < len && ok;) {
        std::span<uint8_t> room = fr.read_space();
        codec::Bytes read(stream + pos + done, len - done);
        if (!room.empty()) {
          size_t n = std::min(room.size(), len - done);
          std::memcpy(room.data(), stream + pos + done, n);
          read = codec::Bytes(room.data(), n);
          fuzz::check(fr.is_read_space(read), "socket: bytes read into read_space() not recognised as such");
        }
        ok = fr.feed(read, on_frame);
        done += read.size();
        if (end_reads || (done & 1)) fr.end_read();
      }
    } else {
      ok = fr.feed(codec::Bytes(stream + pos, len), on_frame);
    }
    if (!ok) failed = true;
    if (stop_here && got.size() > frames_before) {
      // on_frame said stop: the rest of this piece is dropped, and the stream is out of step with
      // the reference from here on. Check the prefix and stop comparing.
      stopped = true;
      dropped_before = got.size();
      fuzz::check(ok, "stop: feed() reported an error after on_frame returned false");
      break;
    }
    pos += len;
  }
  if (stopped) {
    std::vector<std::vector<uint8_t>> prefix(ref.frames.begin(),
                                             ref.frames.begin() + static_cast<ptrdiff_t>(std::min(dropped_before, ref.frames.size())));
    fuzz::check(got == prefix, "stop: frames before the stop differ from the reference");
    return 0;
  }
  fuzz::check(failed == ref.error,
              std::string("pieces: framing error ") + (failed ? "reported" : "not reported") + " but the reference says otherwise");
  fuzz::check(got == ref.frames,
              "pieces: frames differ from the reference (" + std::to_string(got.size()) + " vs " + std::to_string(ref.frames.size()) + ")");
  fuzz::check(fr.looks_like_tls() == ref.tls, "pieces: TLS flag differs");
  fuzz::check(fr.frames() == ref.frames.size(), "pieces: frames() count differs");
  if (socket) {
    fr.end_read();
    if (!ref.error && ref.leftover == 0)
      fuzz::check(fr.reserved() == 0, "socket: a reader with no unfinished frame holds a buffer after end_read()");
  }
  if (!ref.error)
    fuzz::check(fr.buffered() == ref.leftover,
                "pieces: buffered() " + std::to_string(fr.buffered()) + " differs from the leftover " + std::to_string(ref.leftover));
  // After an error every later feed is refused.
  if (failed)
    fuzz::check(!fr.feed(codec::Bytes(stream, stream_size), [](codec::Bytes) { return true; }), "feed() accepted bytes after an error");
  return 0;
}
