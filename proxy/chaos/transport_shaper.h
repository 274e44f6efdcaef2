// TransportShaper: the byte-stream toxics of fault rules (docs/faults.md scenario 14, as Toxiproxy's
// `bandwidth` and `slicer`), for one direction of one connection.
//
//   Pipeline ──send(bytes, toxic?)──► TransportShaper ──write(piece); flush()──► TcpStream
//                                        │ queue of pieces with release times (one uv_timer)
//
// Bytes sent without a toxic while nothing is queued go straight to `write` (no copy, no timer):
// the shaper costs nothing when no transport rule fires. Bytes with a toxic are cut into pieces:
//   - slicer: pieces of `slice_bytes`, at least `slice_delay` apart (counted from the previous
//     piece's actual write); each piece is its own write + flush, so the peer's reads see the
//     frame arrive in small parts;
//   - bandwidth: the connection's direction is a link of `bytes_per_second`: a piece may start
//     only when the previous one has "finished" (size / rate later); pieces are at most 1/50 s of
//     traffic so the rate holds at a 20 ms granularity.
// Both may apply at once. Bytes that arrive while pieces are queued wait behind them (order holds).
// The queue counts toward the stream's backpressure marks (queued_bytes(), read by the owning
// connection through Pipeline::held_bytes_to_*): above kWriteQueueHighWater (stream queue plus
// shaper queue) the other side is not read; each timer-driven release ends in `flush`, where the
// connection resumes reading once the shaper holds less than kWriteQueueLowWater. So a rule that
// slows a direction to a crawl holds at most about the high-water mark plus one read.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include <uv.h>

#include "codec/reader.h"
#include "proxy/net/deadline_timer.h"
#include "proxy/util/lazy_deque.h"

namespace kproxy::chaos {

/// One transport toxic; a field at 0 is off.
struct TransportToxic {
  uint64_t bytes_per_second = 0;
  uint64_t slice_bytes = 0;
  std::chrono::milliseconds slice_delay{0};
  bool any() const { return bytes_per_second > 0 || slice_bytes > 0; }
};

class TransportShaper {
 public:
  /// `write` appends bytes to the stream; `flush` hands what was appended to the kernel. Both are
  /// called on the loop thread; `flush` may end up calling shutdown() (a failed write closes).
  /// `clock`: what release times are read against (the services' clock; a test's ManualClock,
  /// moved by hand and followed by pump()); it must outlive the shaper.
  TransportShaper(uv_loop_t* loop, const util::Clock& clock, std::function<void(codec::Bytes)> write, std::function<void()> flush);
  ~TransportShaper();
  TransportShaper(const TransportShaper&) = delete;
  TransportShaper& operator=(const TransportShaper&) = delete;

  /// Sends `bytes` shaped by `toxic` (nullptr or !any(): as they are, behind anything queued).
  /// What is due now is written at once and not flushed (the caller flushes, as for a plain write).
  void send(codec::Bytes bytes, const TransportToxic* toxic);
  /// Bytes waiting for their release time.
  size_t queued_bytes() const { return queued_bytes_; }
  bool idle() const { return pieces_.empty(); }
  /// Drops what is queued and stops the timer; nothing is written afterwards.
  void shutdown();
  /// Writes (and flushes, for slices) the pieces due at the clock's now and arms the timer for the
  /// next. The timer calls it; a test that moves a ManualClock calls it after each step.
  void pump();

 private:
  struct Piece {
    std::vector<uint8_t> bytes;
    std::chrono::steady_clock::time_point release_at;
    bool flush_after = false;  ///< a slice: its own write
    /// A slice's delay after the previous piece's actual write (a late timer does not let two
    /// slices go out together).
    std::chrono::milliseconds gap{0};
  };
  void arm(std::chrono::steady_clock::time_point at);

  const util::Clock& clock_;
  std::function<void(codec::Bytes)> write_;
  std::function<void()> flush_;
  /// Allocated on the first hold, released once drained (an idle shaper holds no memory).
  util::LazyDeque<Piece> pieces_;
  size_t queued_bytes_ = 0;
  /// When the simulated link is free again (bandwidth), or the last slice's release (slicer).
  std::chrono::steady_clock::time_point next_free_{};
  net::DeadlineTimer timer_;
  bool stopped_ = false;
  bool pumping_ = false;
};

}  // namespace kproxy::chaos
