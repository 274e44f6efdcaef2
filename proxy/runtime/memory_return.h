// Memory return: what kproxy frees goes back to the system, not only to malloc's free lists
// (docs/architecture.md "Memory").
//
// kproxy's large buffers (frames gathered across reads, copies queued toward a slow peer) come
// from malloc. glibc serves a block of 128 KiB or more from a mapping of its own, unmapped when
// freed, but raises that threshold to the size of every such block freed (up to 32 MiB): after a
// burst of large frames the next ones come from the arenas (one per worker thread), and once
// freed they stay resident there as free chunks; smaller blocks freed in between the live ones
// stay too. Measured (issue #30 item 5, docs/architecture.md "Memory"): 2 waves of 16 connections
// gathering 3-16 MiB each left RSS 49-54 MiB above its start for good; 1,200 connections with
// 60-120 KiB each, 32-34 MiB. The first needs the fixed threshold, the second the trim.
//
// Two measures, both glibc's own interfaces (mallopt(3), malloc_trim(3)):
//   configure_allocator()   at start: a fixed mmap threshold (kOwnMappingThreshold), which also
//                           turns the dynamic raise off, so a large buffer is unmapped when freed;
//   IdleTrimPolicy + trim_free_memory()   a worker whose last connection closed, or that closed
//                           kTrimAfterCloses connections since its last trim, calls malloc_trim(0)
//                           kTrimDelay later (at most once per kTrimDelay per worker): the free
//                           pages inside every arena go back (small blocks, fragmentation).
// Neither applies to other allocators (a sanitizer's): both are then no-ops.
#pragma once

#include <chrono>
#include <cstddef>

namespace kproxy::proxy {

/// Blocks at least this large get a mapping of their own, returned when freed (glibc's initial
/// M_MMAP_THRESHOLD, kept fixed).
inline constexpr size_t kOwnMappingThreshold = 128 << 10;
/// A trim runs this long after what asked for it, and a worker trims at most this often.
inline constexpr std::chrono::milliseconds kTrimDelay{1000};
/// A busy worker trims after this many closes (a burst of closes), even with connections open.
inline constexpr size_t kTrimAfterCloses = 64;

/// Sets the allocator's fixed mmap threshold. Once, at start, before the worker threads.
/// Returns false when the allocator is not glibc's (or refused it).
bool configure_allocator();

/// Gives the free pages of every malloc arena back to the system (malloc_trim(0)). Returns true
/// when something was given back.
bool trim_free_memory();

/// When a worker trims (the timer and the call are the worker's): one worker's closes in.
class IdleTrimPolicy {
 public:
  explicit IdleTrimPolicy(size_t closes_per_trim = kTrimAfterCloses) : closes_per_trim_(closes_per_trim) {}

  /// A connection closed, `open` remain. True when a trim is to be scheduled now (none is yet).
  bool on_close(size_t open) {
    ++closes_;
    if (scheduled_ || (open != 0 && closes_ < closes_per_trim_)) return false;
    scheduled_ = true;
    return true;
  }
  /// The scheduled trim ran: the count starts again.
  void trimmed() {
    scheduled_ = false;
    closes_ = 0;
  }
  bool scheduled() const { return scheduled_; }

 private:
  size_t closes_per_trim_;
  size_t closes_ = 0;  ///< since the last trim
  bool scheduled_ = false;
};

}  // namespace kproxy::proxy
