#include "codec/frame_reader.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <span>
#include <vector>

using kproxy::codec::Bytes;
using kproxy::codec::FrameReader;

namespace {

std::vector<uint8_t> frame(std::vector<uint8_t> body) {
  std::vector<uint8_t> f{0, 0, static_cast<uint8_t>(body.size() >> 8), static_cast<uint8_t>(body.size())};
  f.insert(f.end(), body.begin(), body.end());
  return f;
}

std::vector<std::vector<uint8_t>> feed_in_pieces(const std::vector<uint8_t>& stream, const std::vector<size_t>& cuts) {
  FrameReader reader(1024);
  std::vector<std::vector<uint8_t>> out;
  size_t prev = 0;
  std::vector<size_t> points = cuts;
  points.push_back(stream.size());
  for (size_t cut : points) {
    Bytes piece(stream.data() + prev, cut - prev);
    REQUIRE(reader.feed(piece, [&](Bytes f) {
      out.emplace_back(f.begin(), f.end());
      return true;
    }));
    prev = cut;
  }
  CHECK(reader.buffered() == 0);
  return out;
}

}  // namespace

TEST_CASE("FrameReader gives the same frames for every split of the stream") {
  // Given three frames, one of them empty (size 0 is legal: SASL)
  std::vector<std::vector<uint8_t>> frames{frame({1, 2, 3, 4, 5}), frame({}), frame({9, 8, 7, 6, 5, 4, 3, 2, 1})};
  std::vector<uint8_t> stream;
  for (auto& f : frames) stream.insert(stream.end(), f.begin(), f.end());
  // When the stream is cut at every single offset, and at every pair of offsets
  for (size_t a = 0; a <= stream.size(); ++a) {
    CHECK(feed_in_pieces(stream, {a}) == frames);
    for (size_t b = a; b <= stream.size(); ++b) CHECK(feed_in_pieces(stream, {a, b}) == frames);
  }
  // And byte by byte
  std::vector<size_t> every;
  for (size_t i = 1; i < stream.size(); ++i) every.push_back(i);
  CHECK(feed_in_pieces(stream, every) == frames);
}

TEST_CASE("FrameReader refuses a negative size") {
  FrameReader reader(1024);
  std::vector<uint8_t> bad{0xff, 0xff, 0xff, 0xfe, 0};
  CHECK_FALSE(reader.feed(bad, [](Bytes) { return true; }));
  CHECK(reader.error() == "negative frame size -2");
  CHECK_FALSE(reader.looks_like_tls());
}

TEST_CASE("FrameReader refuses a size above its limit, even split across pieces") {
  FrameReader reader(100);
  std::vector<uint8_t> a{0x00, 0x00}, b{0x01, 0x00};
  CHECK(reader.feed(a, [](Bytes) { return true; }));
  CHECK_FALSE(reader.feed(b, [](Bytes) { return true; }));
  CHECK(reader.error() == "frame size 256 exceeds the limit of 100 bytes");
}

TEST_CASE("FrameReader recognises a TLS ClientHello on a plaintext port") {
  FrameReader reader(100 << 20);
  std::vector<uint8_t> hello{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03};
  CHECK_FALSE(reader.feed(hello, [](Bytes) { return true; }));
  CHECK(reader.looks_like_tls());
  CHECK(reader.error().find("TLS") != std::string::npos);
}

TEST_CASE("FrameReader says what protocol an oversized 'size' that is text belongs to") {
  // "GET " read as a size is 1195725856: the error used to say only that.
  auto refused = [](std::string_view bytes) {
    FrameReader reader(100 << 20);
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    CHECK_FALSE(reader.feed(data, [](Bytes) { return true; }));
    CHECK_FALSE(reader.looks_like_tls());
    return reader.error();
  };
  CHECK(refused("GET /metrics HTTP/1.1\r\n") ==
        "HTTP request bytes on a Kafka port (an HTTP client or health check connected to a Kafka listener) "
        "(frame size 1195725856 exceeds the limit of 104857600 bytes)");
  CHECK(refused("POST /x HTTP/1.1\r\n").starts_with("HTTP request bytes on a Kafka port"));
  CHECK(refused("HTTP/1.1 400 Bad Request\r\n").starts_with("HTTP response bytes where a Kafka frame was expected"));
  CHECK(refused("SSH-2.0-OpenSSH_9.2\r\n").starts_with("SSH bytes"));
  CHECK(refused("helo there").starts_with("text bytes where a Kafka frame was expected"));
  // Binary that is merely too large keeps the plain message.
  CHECK(refused(std::string_view("\x7f\x01\x02\x03", 4)) == "frame size 2130772483 exceeds the limit of 104857600 bytes");
}

TEST_CASE("FrameReader stops when the callback says so") {
  FrameReader reader(1024);
  auto f = frame({1});
  std::vector<uint8_t> stream = f;
  stream.insert(stream.end(), f.begin(), f.end());
  int seen = 0;
  CHECK(reader.feed(stream, [&](Bytes) {
    ++seen;
    return false;
  }));
  CHECK(seen == 1);
  CHECK(reader.frames() == 1);
}

TEST_CASE("FrameReader hands out whole frames as views into the piece without copying") {
  FrameReader reader(1024);
  auto f = frame({1, 2, 3});
  const uint8_t* seen = nullptr;
  CHECK(reader.feed(f, [&](Bytes b) {
    seen = b.data();
    return true;
  }));
  CHECK(seen == f.data());
}

namespace {

// A frame of `body_size` bytes whose body is a position-dependent pattern.
std::vector<uint8_t> big_frame(size_t body_size, uint8_t seed) {
  std::vector<uint8_t> f{static_cast<uint8_t>(body_size >> 24), static_cast<uint8_t>(body_size >> 16), static_cast<uint8_t>(body_size >> 8),
                         static_cast<uint8_t>(body_size)};
  for (size_t i = 0; i < body_size; ++i) f.push_back(static_cast<uint8_t>(i * 31 + seed));
  return f;
}

// Feeds `stream` the way TcpStream does: from a shared 64 KiB "read buffer" unless the reader
// offers read_space(), then straight into that room (at most `max_read` bytes per read).
struct SocketFeed {
  FrameReader reader;
  std::vector<std::vector<uint8_t>> frames;
  size_t direct_bytes = 0;
  size_t max_reserved = 0;
  size_t taken = 0;
  size_t reads = 0;
  bool take = false;
  std::vector<kproxy::codec::FrameBuffer> kept;

  explicit SocketFeed(size_t max_frame) : reader(max_frame) {}

  void run(const std::vector<uint8_t>& stream, size_t max_read) {
    std::vector<uint8_t> shared(64 << 10);
    size_t pos = 0;
    while (pos < stream.size()) {
      auto room = reader.read_space();
      Bytes piece;
      if (!room.empty()) {
        size_t n = std::min({room.size(), max_read, stream.size() - pos});
        std::memcpy(room.data(), stream.data() + pos, n);  // what the kernel's recv() does
        piece = Bytes(room.data(), n);
        CHECK(reader.is_read_space(piece));
        direct_bytes += n;
      } else {
        size_t n = std::min({shared.size(), max_read, stream.size() - pos});
        std::memcpy(shared.data(), stream.data() + pos, n);
        piece = Bytes(shared.data(), n);
        CHECK_FALSE(reader.is_read_space(piece));
      }
      pos += piece.size();
      ++reads;
      Bytes borrowable = reader.read_piece(piece);
      REQUIRE(reader.feed(piece, [&](Bytes f) {
        frames.emplace_back(f.begin(), f.end());
        if (take && reader.holds(f)) {
          kept.push_back(reader.take_frame());
          CHECK(kept.back().data() == f.data());  // the very buffer, not a copy
          ++taken;
        } else if (!borrowable.empty() && borrowable.data() != piece.data()) {
          // Read-through: every frame is a view the owner may queue until end_read(), inside
          // what read_piece() said (from the shared buffer, a gathered frame is copied instead).
          CHECK(f.data() >= borrowable.data());
          CHECK(f.data() + f.size() <= borrowable.data() + borrowable.size());
        }
        return true;
      }));
      max_reserved = std::max(max_reserved, reader.reserved());
      reader.end_read();  // the owner has written what it queued
    }
  }
};

}  // namespace

TEST_CASE("FrameReader gives the same large frames for splits at many offsets") {
  // Given a small frame, a 200 KiB frame and another small one
  std::vector<std::vector<uint8_t>> frames{big_frame(10, 1), big_frame(200 << 10, 2), big_frame(3, 3)};
  std::vector<uint8_t> stream;
  for (auto& f : frames) stream.insert(stream.end(), f.begin(), f.end());
  // When it is cut at offsets around each frame boundary and prefix byte, and in the middle
  std::vector<size_t> cuts;
  size_t boundary = 0;
  for (auto& f : frames) {
    for (size_t d = 0; d <= 6; ++d) {
      if (boundary + d <= stream.size()) cuts.push_back(boundary + d);
      if (boundary >= d) cuts.push_back(boundary - d);
    }
    boundary += f.size();
  }
  for (size_t c = 1; c < stream.size(); c += 4099) cuts.push_back(c);
  for (size_t a : cuts) {
    FrameReader reader(1 << 20);
    std::vector<std::vector<uint8_t>> out;
    auto collect = [&](Bytes f) {
      out.emplace_back(f.begin(), f.end());
      return true;
    };
    REQUIRE(reader.feed(Bytes(stream.data(), a), collect));
    REQUIRE(reader.feed(Bytes(stream.data() + a, stream.size() - a), collect));
    CHECK(out == frames);
    CHECK(reader.buffered() == 0);
    CHECK(reader.reserved() == 0);  // idle: no buffer kept
  }
}

TEST_CASE("FrameReader reads a large frame straight into its own buffer and hands that buffer over") {
  // Given 1 MiB frames between small ones, arriving in reads of at most 100,000 bytes
  std::vector<std::vector<uint8_t>> frames{big_frame(100, 1), big_frame(1 << 20, 2), big_frame(1 << 20, 3), big_frame(5, 4)};
  std::vector<uint8_t> stream;
  for (auto& f : frames) stream.insert(stream.end(), f.begin(), f.end());
  SocketFeed feed(100 << 20);
  feed.take = true;
  feed.run(stream, 100000);
  // Then the frames are intact and in order
  CHECK(feed.frames == frames);
  // And most of each large frame was read in place (only its first piece went through the shared buffer)
  CHECK(feed.direct_bytes >= 2 * ((1 << 20) - (64 << 10)));
  // And both large frames were taken as their buffers (whole frames in one piece are views)
  CHECK(feed.taken == 2);
  REQUIRE(feed.kept.size() == 2);
  CHECK(std::vector<uint8_t>(feed.kept[0].bytes().begin(), feed.kept[0].bytes().end()) == frames[1]);
  CHECK(std::vector<uint8_t>(feed.kept[1].bytes().begin(), feed.kept[1].bytes().end()) == frames[2]);
  // And the reader holds nothing afterwards
  CHECK(feed.reader.reserved() == 0);
}

TEST_CASE("FrameReader gives the same frames whatever the read size, with read_space in use") {
  std::vector<std::vector<uint8_t>> frames{big_frame(70 << 10, 1), big_frame(1, 2), big_frame(300 << 10, 3), big_frame(40 << 10, 4)};
  std::vector<uint8_t> stream;
  for (auto& f : frames) stream.insert(stream.end(), f.begin(), f.end());
  for (size_t max_read : {1ul, 3ul, 4ul, 5ul, 1000ul, 4096ul, 65535ul, 65536ul, 65537ul, 1ul << 20}) {
    SocketFeed feed(1 << 20);
    feed.run(stream, max_read);
    CHECK_MESSAGE(feed.frames == frames, "reads of at most " << max_read << " bytes");
    CHECK(feed.reader.reserved() == 0);
  }
}

TEST_CASE("FrameReader: a size prefix announcing a huge frame does not reserve it up front") {
  // Given a limit of 100 MiB and a prefix announcing a frame of 100 MiB
  FrameReader reader(100 << 20);
  std::vector<uint8_t> start(1000, 0x22);
  start[0] = 0x06;  // 0x06400000 = 100 MiB
  start[1] = 0x40;
  start[2] = 0;
  start[3] = 0;
  // When only its first 1,000 bytes arrive
  REQUIRE(reader.feed(start, [](Bytes) { return true; }));
  // Then at most kFrameUpfrontReserve is reserved, and read_space offers no more than that
  CHECK(reader.buffered() == 1000);
  CHECK(reader.reserved() <= kproxy::codec::kFrameUpfrontReserve);
  auto room = reader.read_space();
  CHECK(room.size() > 0);
  CHECK(room.size() <= kproxy::codec::kFrameUpfrontReserve);
  CHECK(reader.reserved() <= kproxy::codec::kFrameUpfrontReserve);
  // And as bytes arrive, the room grows with them: never more than twice what arrived plus one step
  size_t received = start.size();
  std::vector<uint8_t> chunk(1 << 20, 0x11);
  for (int i = 0; i < 40; ++i) {
    auto space = reader.read_space();
    REQUIRE(space.size() >= kproxy::codec::kFrameDirectReadMin);
    size_t n = std::min(space.size(), chunk.size());
    std::memcpy(space.data(), chunk.data(), n);
    REQUIRE(reader.feed(Bytes(space.data(), n), [](Bytes) { return true; }));
    received += n;
    CHECK(reader.buffered() == received);
    CHECK(reader.reserved() <= 2 * received + kproxy::codec::kFrameUpfrontReserve);
  }
}

TEST_CASE("FrameReader: no read_space for a short rest, nor after a framing error") {
  FrameReader reader(1 << 20);
  auto f = big_frame(1000, 1);
  REQUIRE(reader.feed(Bytes(f.data(), 10), [](Bytes) { return true; }));
  CHECK(reader.read_space().empty());  // 994 bytes missing: read them with what follows
  FrameReader bad(100);
  std::vector<uint8_t> neg{0xff, 0xff, 0xff, 0xfe};
  CHECK_FALSE(bad.feed(neg, [](Bytes) { return true; }));
  CHECK(bad.read_space().empty());
}

TEST_CASE("FrameReader: random frames, random read sizes, frames taken or not: the same frames come out") {
  // Fixed seed, printed: a failure is reproducible.
  const uint64_t seed = 0x6b70726f78790004ULL;
  MESSAGE("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 40; ++round) {
    std::vector<std::vector<uint8_t>> frames;
    std::vector<uint8_t> stream;
    int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      // Mostly small frames, some just around the direct-read threshold, some large.
      size_t body = rng() % 4 == 0   ? (rng() % (300 << 10))
                    : rng() % 3 == 0 ? (kproxy::codec::kFrameDirectReadMin - 8 + rng() % 16)
                                     : rng() % 2000;
      frames.push_back(big_frame(body, static_cast<uint8_t>(rng())));
      stream.insert(stream.end(), frames.back().begin(), frames.back().end());
    }
    SocketFeed feed(1 << 20);
    feed.take = rng() % 2 == 0;
    // Reads of random size, as the kernel returns them: between 1 byte and 200 KiB.
    std::vector<uint8_t> shared(64 << 10);
    size_t pos = 0;
    while (pos < stream.size()) {
      size_t max_read = 1 + rng() % (rng() % 2 ? 200 << 10 : 100);
      auto room = feed.reader.read_space();
      std::span<uint8_t> into = room.empty() ? std::span<uint8_t>(shared) : room;
      size_t len = std::min({into.size(), max_read, stream.size() - pos});
      std::memcpy(into.data(), stream.data() + pos, len);
      pos += len;
      REQUIRE(feed.reader.feed(Bytes(into.data(), len), [&](Bytes f) {
        feed.frames.emplace_back(f.begin(), f.end());
        if (feed.take && feed.reader.holds(f)) feed.kept.push_back(feed.reader.take_frame());
        return true;
      }));
      // An owner that forgets end_read() loses nothing: read_space() and feed() do it.
      if (rng() % 2) feed.reader.end_read();
    }
    feed.reader.end_read();
    CHECK_MESSAGE(feed.frames == frames, "round " << round);
    for (auto& k : feed.kept) {  // a taken buffer holds exactly one of the frames
      std::vector<uint8_t> bytes(k.bytes().begin(), k.bytes().end());
      CHECK(std::find(frames.begin(), frames.end(), bytes) != frames.end());
    }
    CHECK(feed.reader.reserved() == 0);
  }
}

TEST_CASE("FrameReader: a frame of exactly the limit passes, one byte more is refused; never buffers beyond it") {
  std::vector<uint8_t> body(1024, 7);
  std::vector<uint8_t> at_limit = frame(body);
  FrameReader reader(1024);
  size_t frames = 0;
  size_t peak = 0;
  // Byte by byte: the reader buffers the frame, never more than the limit plus the size prefix.
  for (uint8_t b : at_limit) {
    REQUIRE(reader.feed(Bytes(&b, 1), [&](Bytes f) {
      CHECK(f.size() == 1024 + 4);
      ++frames;
      return true;
    }));
    peak = std::max(peak, reader.buffered());
  }
  CHECK(frames == 1);
  CHECK(peak <= 1024 + 4);
  CHECK(reader.buffered() == 0);

  std::vector<uint8_t> over = frame(std::vector<uint8_t>(1025, 7));
  FrameReader strict(1024);
  CHECK_FALSE(strict.feed(Bytes(over.data(), 4), [](Bytes) { return true; }));
  CHECK(strict.error() == "frame size 1025 exceeds the limit of 1024 bytes");
  CHECK(strict.buffered() == 0);  // nothing of the refused frame was gathered
}

TEST_CASE("FrameReader hands out a large frame's bytes as they arrive, and the whole frame at its end") {
  // Given a 200,000-byte frame (then a small one) arriving in three pieces
  std::vector<uint8_t> big = big_frame(200000, 7);
  std::vector<uint8_t> small = big_frame(10, 8);
  std::vector<uint8_t> stream = big;
  stream.insert(stream.end(), small.begin(), small.end());
  FrameReader reader(1 << 20);
  std::vector<uint8_t> streamed;
  std::vector<std::vector<uint8_t>> frames;
  std::vector<size_t> streamed_at_frame;
  auto on_frame = [&](Bytes f) {
    frames.emplace_back(f.begin(), f.end());
    streamed_at_frame.push_back(reader.streamed());
    return true;
  };
  // When the first piece is in, the reader holds a partial frame of the announced size
  REQUIRE(reader.feed(Bytes(stream.data(), 1000), on_frame));
  CHECK(reader.partial_frame_size() == big.size());
  CHECK(reader.partial_frame().size() == 1000);
  CHECK(reader.streamed() == 0);
  // And taking what is unstreamed gives those bytes once
  Bytes first = reader.take_unstreamed();
  streamed.insert(streamed.end(), first.begin(), first.end());
  CHECK(reader.streamed() == 1000);
  CHECK(reader.take_unstreamed().empty());
  // When more arrives, only the new bytes are handed out
  REQUIRE(reader.feed(Bytes(stream.data() + 1000, 99000), on_frame));
  Bytes second = reader.take_unstreamed();
  CHECK(second.size() == 99000);
  streamed.insert(streamed.end(), second.begin(), second.end());
  // When the rest arrives, on_frame sees the whole frame and how much of it was streamed
  REQUIRE(reader.feed(Bytes(stream.data() + 100000, stream.size() - 100000), on_frame));
  REQUIRE(frames.size() == 2);
  CHECK(frames[0] == big);
  CHECK(frames[1] == small);
  CHECK(streamed_at_frame == std::vector<size_t>{100000, 0});
  CHECK(std::equal(streamed.begin(), streamed.end(), big.begin()));
  // And the next frame starts unstreamed
  CHECK(reader.streamed() == 0);
  CHECK(reader.partial_frame().empty());
  CHECK(reader.partial_frame_size() == 0);
}

namespace {

// Sets the process's read-through sizes for one test and puts the defaults back after it.
struct ReadThroughSizesFor {
  kproxy::codec::ReadThroughSizes saved = FrameReader::read_through_sizes();
  explicit ReadThroughSizesFor(kproxy::codec::ReadThroughSizes sizes) { FrameReader::set_read_through_sizes(sizes); }
  ~ReadThroughSizesFor() { FrameReader::set_read_through_sizes(saved); }
};

std::vector<uint8_t> concat(const std::vector<std::vector<uint8_t>>& frames) {
  std::vector<uint8_t> stream;
  for (auto& f : frames) stream.insert(stream.end(), f.begin(), f.end());
  return stream;
}

}  // namespace

TEST_CASE("FrameReader reads 16 KiB frames through: after the first split frame every read lands in its buffer") {
  // Given 40 frames of 16 KiB, read as a socket with plenty of bytes waiting would give them
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 40; ++i) frames.push_back(big_frame(16 << 10, static_cast<uint8_t>(i)));
  std::vector<uint8_t> stream = concat(frames);
  SocketFeed feed(1 << 20);
  feed.run(stream, 1 << 20);
  // Then the frames are intact and in order
  CHECK(feed.frames == frames);
  // And only the first read went to the shared 64 KiB buffer: the rest filled the 128 KiB
  // read-through buffer behind the frame left unfinished (without it: ~10 reads of 64 KiB).
  CHECK(feed.direct_bytes == stream.size() - (64 << 10));
  CHECK(feed.reads <= 7);
  CHECK(feed.max_reserved >= kproxy::codec::ReadThroughSizes{}.buffer);  // a cached block may be larger
  // And once the stream ends on a frame boundary the buffer is given back
  CHECK(feed.reader.reserved() == 0);
  CHECK_FALSE(feed.reader.reading_through());
}

TEST_CASE("FrameReader read-through: frames are views into its buffer until end_read(), which moves the unfinished frame to the front") {
  std::vector<std::vector<uint8_t>> frames{big_frame(10 << 10, 1), big_frame(20 << 10, 2), big_frame(5 << 10, 3), big_frame(30 << 10, 4)};
  std::vector<uint8_t> stream = concat(frames);
  FrameReader reader(1 << 20);
  std::vector<std::vector<uint8_t>> out;
  std::vector<Bytes> views;
  auto on_frame = [&](Bytes f) {
    out.emplace_back(f.begin(), f.end());
    views.push_back(f);
    return true;
  };
  // When the first 4 KiB of the 10 KiB frame come from the shared buffer
  REQUIRE(reader.feed(Bytes(stream.data(), 4096), on_frame));
  CHECK(reader.reading_through());
  CHECK(reader.buffered() == 4096);
  // Then the whole rest of the 128 KiB buffer is offered, not just the frame's 6 KiB
  auto room = reader.read_space();
  REQUIRE(room.size() >= (128 << 10) - 4096);
  REQUIRE(room.size() == reader.reserved() - 4096);
  // When the rest of frame 1, frames 2 and 3 and 1,000 bytes of frame 4 arrive in it
  size_t n = frames[0].size() - 4096 + frames[1].size() + frames[2].size() + 1000;
  std::memcpy(room.data(), stream.data() + 4096, n);
  Bytes piece(room.data(), n);
  REQUIRE(reader.is_read_space(piece));
  Bytes borrowable = reader.read_piece(piece);
  REQUIRE(reader.feed(piece, on_frame));
  // Then three frames come out, each a view inside what read_piece() allowed to borrow
  REQUIRE(out.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(out[i] == frames[i]);
    CHECK(views[i].data() >= borrowable.data());
    CHECK(views[i].data() + views[i].size() <= borrowable.data() + borrowable.size());
  }
  CHECK(views[1].data() == views[0].data() + views[0].size());  // back to back, no copy
  // And the unfinished frame is known, charged as what arrived of it
  CHECK(reader.partial_frame_size() == frames[3].size());
  CHECK(reader.buffered() == 1000);
  CHECK(std::equal(reader.partial_frame().begin(), reader.partial_frame().end(), frames[3].begin()));
  // When the read ends, it is at the front of the buffer, and the room behind it is offered
  reader.end_read();
  CHECK(reader.partial_frame().data() == borrowable.data());
  CHECK(std::equal(reader.partial_frame().begin(), reader.partial_frame().end(), frames[3].begin()));
  CHECK(reader.read_space().size() == reader.reserved() - 1000);
  // And the rest of the stream finishes it
  room = reader.read_space();
  size_t rest = stream.size() - 4096 - n;
  std::memcpy(room.data(), stream.data() + 4096 + n, rest);
  REQUIRE(reader.feed(Bytes(room.data(), rest), on_frame));
  reader.end_read();
  CHECK(out == frames);
  CHECK(reader.reserved() == 0);
}

TEST_CASE("FrameReader read-through: a large frame that starts behind the read's frames is streamed from 0 and read into its own buffer") {
  // Given 16 KiB frames around a 1 MiB frame that is forwarded while it arrives (cut-through)
  // (four of them first: the first read, 64 KiB, ends inside the fourth, which starts read-through)
  std::vector<std::vector<uint8_t>> frames{big_frame(16 << 10, 1), big_frame(16 << 10, 2), big_frame(16 << 10, 3), big_frame(16 << 10, 4),
                                           big_frame(1 << 20, 5),  big_frame(16 << 10, 6), big_frame(16 << 10, 7)};
  std::vector<uint8_t> stream = concat(frames);
  FrameReader reader(2 << 20);
  std::vector<std::vector<uint8_t>> out;
  std::vector<size_t> streamed_at_frame;
  std::vector<uint8_t> streamed;
  std::vector<uint8_t> shared(64 << 10);
  size_t pos = 0;
  size_t through_reads = 0;
  while (pos < stream.size()) {
    auto room = reader.read_space();
    if (reader.reading_through()) ++through_reads;
    std::span<uint8_t> into = room.empty() ? std::span<uint8_t>(shared) : room;
    size_t len = std::min(into.size(), stream.size() - pos);
    std::memcpy(into.data(), stream.data() + pos, len);
    pos += len;
    REQUIRE(reader.feed(Bytes(into.data(), len), [&](Bytes f) {
      out.emplace_back(f.begin(), f.end());
      streamed_at_frame.push_back(reader.streamed());
      return true;
    }));
    // The owner streams a frame of 128 KiB or more as it arrives (ClientConnection)
    if (reader.partial_frame_size() >= (128 << 10)) {
      Bytes more = reader.take_unstreamed();
      streamed.insert(streamed.end(), more.begin(), more.end());
    }
    reader.end_read();
  }
  CHECK(out == frames);
  CHECK(through_reads >= 1);
  // Only the large frame was streamed, all of it before its end, and the frames after it start at 0
  REQUIRE(streamed_at_frame.size() == 7);
  CHECK(streamed_at_frame == std::vector<size_t>{0, 0, 0, 0, streamed.size(), 0, 0});
  CHECK(streamed.size() > 0);
  CHECK(std::equal(streamed.begin(), streamed.end(), frames[4].begin()));
  CHECK(reader.reserved() == 0);
}

TEST_CASE("FrameReader read-through: stopping drops the rest of the read; a budget below the buffer keeps the plain way") {
  std::vector<std::vector<uint8_t>> frames{big_frame(8 << 10, 1), big_frame(8 << 10, 2), big_frame(8 << 10, 3)};
  std::vector<uint8_t> stream = concat(frames);
  {
    FrameReader reader(1 << 20);
    REQUIRE(reader.feed(Bytes(stream.data(), 100), [](Bytes) { return true; }));
    REQUIRE(reader.reading_through());
    auto room = reader.read_space();
    std::memcpy(room.data(), stream.data() + 100, stream.size() - 100);
    size_t seen = 0;
    REQUIRE(reader.feed(Bytes(room.data(), stream.size() - 100), [&](Bytes) { return ++seen < 2; }));
    CHECK(seen == 2);  // the third frame was dropped with the rest of the read
    CHECK(reader.buffered() == 0);
    reader.end_read();
    CHECK(reader.reserved() == 0);
  }
  {
    kproxy::codec::FrameMemoryBudget budget(64 << 10);  // below the 128 KiB read-through buffer
    FrameReader reader(1 << 20, &budget);
    REQUIRE(reader.feed(Bytes(stream.data(), 100), [](Bytes) { return true; }));
    CHECK_FALSE(reader.reading_through());
    CHECK(reader.reserved() == frames[0].size());  // room for that one frame, as without read-through
    CHECK(budget.used() == 100);
  }
}

TEST_CASE("FrameReader read-through: the budget is charged the unfinished frame's bytes, and nothing once the read is over") {
  kproxy::codec::FrameMemoryBudget budget(1 << 20);
  std::vector<std::vector<uint8_t>> frames{big_frame(12 << 10, 1), big_frame(12 << 10, 2), big_frame(12 << 10, 3)};
  std::vector<uint8_t> stream = concat(frames);
  FrameReader reader(1 << 20, &budget);
  REQUIRE(reader.feed(Bytes(stream.data(), 5000), [](Bytes) { return true; }));
  CHECK(budget.used() == 5000);
  auto room = reader.read_space();
  size_t n = frames[0].size() + 3000 - 5000;  // the rest of frame 1 and 3,000 bytes of frame 2
  std::memcpy(room.data(), stream.data() + 5000, n);
  REQUIRE(reader.feed(Bytes(room.data(), n), [](Bytes) { return true; }));
  CHECK(budget.used() == 3000);
  reader.end_read();
  CHECK(budget.used() == 3000);
  room = reader.read_space();
  std::memcpy(room.data(), stream.data() + 5000 + n, stream.size() - 5000 - n);
  REQUIRE(reader.feed(Bytes(room.data(), stream.size() - 5000 - n), [](Bytes) { return true; }));
  reader.end_read();
  CHECK(budget.used() == 0);
  CHECK(reader.reserved() == 0);
}

TEST_CASE("FrameReader read-through with small sizes: random frames and reads, end_read() or not, the same frames come out") {
  // Small read-through sizes (as the fuzz target uses) so that many frames and reads cross them.
  ReadThroughSizesFor sizes({.min_frame = 8, .max_frame = 64, .buffer = 128});
  const uint64_t seed = 0x6b70726f78790030ULL;
  MESSAGE("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::vector<uint8_t>> frames;
    int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) frames.push_back(big_frame(rng() % 4 == 0 ? rng() % 300 : rng() % 70, static_cast<uint8_t>(rng())));
    std::vector<uint8_t> stream = concat(frames);
    FrameReader reader(1 << 20);
    std::vector<std::vector<uint8_t>> out;
    std::vector<uint8_t> shared(64);
    size_t pos = 0;
    while (pos < stream.size()) {
      auto room = reader.read_space();
      std::span<uint8_t> into = room.empty() ? std::span<uint8_t>(shared) : room;
      size_t len = std::min({into.size(), 1 + static_cast<size_t>(rng() % 150), stream.size() - pos});
      std::memcpy(into.data(), stream.data() + pos, len);
      pos += len;
      REQUIRE(reader.feed(Bytes(into.data(), len), [&](Bytes f) {
        out.emplace_back(f.begin(), f.end());
        return true;
      }));
      if (rng() % 2) reader.end_read();
    }
    reader.end_read();
    CHECK_MESSAGE(out == frames, "round " << round);
    CHECK(reader.reserved() == 0);
  }
}
