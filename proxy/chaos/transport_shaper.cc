#include "proxy/chaos/transport_shaper.h"

#include <algorithm>

namespace kproxy::chaos {

namespace {
// A bandwidth-limited piece carries at most this fraction of a second of traffic, so the rate
// holds at a 20 ms granularity without a timer per byte.
constexpr uint64_t kPiecesPerSecond = 50;
}  // namespace

TransportShaper::TransportShaper(uv_loop_t* loop, const util::Clock& clock, std::function<void(codec::Bytes)> write,
                                 std::function<void()> flush)
    : clock_(clock), write_(std::move(write)), flush_(std::move(flush)), timer_(loop, clock, [this] {
        pump();
        if (!stopped_) flush_();
      }) {}

TransportShaper::~TransportShaper() { shutdown(); }

void TransportShaper::shutdown() {
  stopped_ = true;
  pieces_.clear();
  queued_bytes_ = 0;
  timer_.cancel();
}

void TransportShaper::send(codec::Bytes bytes, const TransportToxic* toxic) {
  if (stopped_ || bytes.empty()) return;
  auto now = clock_.now();
  if (!toxic || !toxic->any()) {
    if (pieces_.empty()) {
      write_(bytes);
      return;
    }
    pieces_.push_back(Piece{std::vector<uint8_t>(bytes.begin(), bytes.end()), pieces_.back().release_at, false});
    queued_bytes_ += bytes.size();
    return;
  }
  auto t = std::max(now, next_free_);
  if (!pieces_.empty()) t = std::max(t, pieces_.back().release_at);
  uint64_t piece = toxic->slice_bytes > 0 ? toxic->slice_bytes : bytes.size();
  if (toxic->bytes_per_second > 0) piece = std::min(piece, std::max<uint64_t>(1, toxic->bytes_per_second / kPiecesPerSecond));
  for (size_t off = 0; off < bytes.size(); off += piece) {
    size_t n = std::min<size_t>(piece, bytes.size() - off);
    auto gap = off > 0 ? toxic->slice_delay : std::chrono::milliseconds(0);
    t += gap;
    pieces_.push_back(
        Piece{std::vector<uint8_t>(bytes.begin() + static_cast<ptrdiff_t>(off), bytes.begin() + static_cast<ptrdiff_t>(off + n)), t,
              toxic->slice_bytes > 0, gap});
    queued_bytes_ += n;
    // The link is busy sending this piece for n / rate seconds.
    if (toxic->bytes_per_second > 0) t += std::chrono::nanoseconds(n * 1'000'000'000ULL / toxic->bytes_per_second);
  }
  next_free_ = t;
  pump();
}

void TransportShaper::pump() {
  if (stopped_ || pumping_) return;
  pumping_ = true;
  auto now = clock_.now();
  while (!pieces_.empty() && pieces_.front().release_at <= now) {
    Piece p = std::move(pieces_.front());
    pieces_.pop_front();
    queued_bytes_ -= p.bytes.size();
    write_(codec::Bytes(p.bytes.data(), p.bytes.size()));
    if (p.flush_after) {
      flush_();  // may close the connection, and so shut this shaper down
      if (stopped_) return;
    }
    if (!pieces_.empty() && pieces_.front().gap.count() > 0) {
      auto& next = pieces_.front();
      next.release_at = std::max(next.release_at, clock_.now() + next.gap);
    }
  }
  pumping_ = false;
  if (!pieces_.empty()) arm(pieces_.front().release_at);
  else pieces_.release_if_empty();
}

void TransportShaper::arm(std::chrono::steady_clock::time_point at) {
  if (!stopped_) timer_.arm(at);
}

}  // namespace kproxy::chaos
