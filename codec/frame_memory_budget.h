// FrameMemoryBudget: a cap on the memory all FrameReaders of the process hold for frames they are
// still gathering.
//
// A frame split across reads is gathered in its reader's buffer (codec/frame_reader.h). Each
// connection's frame is bounded by the per-frame limit, but many connections each sending the
// start of a large frame and then nothing would add up without bound (16 connections × 16 MiB
// of partial frames once cost 448 MB). Readers charge the budget for the buffer capacity they
// reserve and give it back when the frame is handed out; a reservation that would pass the cap
// fails that one connection's frame (FrameReader::over_budget), never the others'.
#pragma once

#include <atomic>
#include <cstddef>

namespace kproxy::codec {

class FrameMemoryBudget {
 public:
  /// `limit` bytes over all readers that use this budget; 0 = no limit.
  explicit FrameMemoryBudget(size_t limit = 0) : limit_(limit) {}

  /// Takes `n` bytes. False, taking nothing, when that would pass the limit.
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

  size_t used() const { return used_.load(std::memory_order_relaxed); }
  size_t limit() const { return limit_.load(std::memory_order_relaxed); }
  /// Changes the limit (a config reload); bytes already held stay held.
  void set_limit(size_t limit) { limit_.store(limit, std::memory_order_relaxed); }

 private:
  std::atomic<size_t> limit_;
  std::atomic<size_t> used_{0};
};

}  // namespace kproxy::codec
