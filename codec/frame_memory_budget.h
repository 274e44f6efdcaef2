// FrameMemoryBudget: the memory all FrameReaders of the process hold for frames they are still
// gathering, against a limit (limits.max_buffered_frame_bytes); the same type also counts the
// announced bytes of streamed requests (limits.max_streamed_request_bytes) with charge().
//
// A frame split across reads is gathered in its reader's buffer (codec/frame_reader.h). Each
// connection's frame is bounded by the per-frame limit, but many connections each sending the
// start of a large frame and then nothing would add up without bound (16 connections × 16 MiB
// of partial frames once cost 448 MB). Readers hold() the bytes of partial frames they really
// received — not the buffer capacity reserved ahead of them, which is address space the kernel
// has not backed (charging the capacity made 256 MiB received show as 512 MiB held: a buffer
// doubles just before its bytes fill it) — and release() them once the frame is out.
//
// Passing the limit refuses nobody: the bytes are already in memory. It makes the budget
// over_limit(), and the connections' read pressure (proxy/connection/read_pressure.h) then stops
// reading the connections that hold the most, until the budget is back under resume_mark().
#pragma once

#include <atomic>
#include <cstddef>

namespace kproxy::codec {

/// A connection's partial frame of at most this many bytes is never paused nor refused for the
/// budget: small requests and responses always get through, however full the budget is.
inline constexpr size_t kFrameMemoryReserve = 1 << 20;

class FrameMemoryBudget {
 public:
  /// `limit` bytes over all readers that use this budget; 0 = no limit.
  explicit FrameMemoryBudget(size_t limit = 0) : limit_(limit) {}

  /// Takes `n` bytes. False, taking nothing, when that would pass the limit (the streamed-request
  /// budget: a request that does not fit is gathered instead).
  bool charge(size_t n) {
    size_t used = used_.load(std::memory_order_relaxed);
    do {
      size_t limit = limit_.load(std::memory_order_relaxed);
      if (limit != 0 && (used > limit || n > limit - used)) return false;
    } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
    return true;
  }
  /// Gives back `n` bytes taken before.
  void refund(size_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }

  /// Counts `n` bytes of partial frames that arrived (they are in memory already: never refused).
  void hold(size_t n) { used_.fetch_add(n, std::memory_order_relaxed); }
  /// Gives back `n` bytes counted with hold().
  void release(size_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }

  size_t used() const { return used_.load(std::memory_order_relaxed); }
  size_t limit() const { return limit_.load(std::memory_order_relaxed); }
  /// Changes the limit (a config reload); bytes already held stay held.
  void set_limit(size_t limit) { limit_.store(limit, std::memory_order_relaxed); }

  /// More is held than the limit allows: the largest holders stop being read.
  bool over_limit() const {
    size_t limit = this->limit();
    return limit != 0 && used() > limit;
  }
  /// Paused connections are read again once no more than this is held (seven eighths of the
  /// limit: a margin, so that one frame finishing does not resume everyone only to pause them again).
  size_t resume_mark() const { return limit() - limit() / 8; }

 private:
  std::atomic<size_t> limit_;
  std::atomic<size_t> used_{0};
};

}  // namespace kproxy::codec
