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
//   IdleTrimPolicy + trim_free_memory()   a worker whose last connection closed, or that
//                           counted kTrimAfterChanges opens, TLS handshakes and closes since its
//                           last trim, calls malloc_trim(0) once kTrimDelay passed without another
//                           (at most kTrimLongestWait later): the free pages inside every arena go
//                           back (small blocks, fragmentation). Opens and handshakes count because
//                           a TLS handshake allocates and frees far more than its connection keeps
//                           (record buffers, the peer's certificate chain while it is verified,
//                           the key exchange): after a burst of new TLS connections those holes
//                           between the live sessions were a third of an idle TLS connection's
//                           resident bytes (bench/tls/README.md, issue #35).
// Neither applies under a sanitizer (its own allocator; memory_return.cc says why the trim is skipped).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace kproxy::runtime {

/// Blocks at least this large get a mapping of their own, returned when freed (glibc's initial
/// M_MMAP_THRESHOLD, kept fixed).
inline constexpr size_t kOwnMappingThreshold = 128 << 10;
/// A trim runs once a worker opened or closed no connection for this long.
inline constexpr std::chrono::milliseconds kTrimDelay{1000};
/// A busy worker trims after this many opens and closes (a burst), even with connections open.
inline constexpr size_t kTrimAfterChanges = 64;

/// Sets the allocator's fixed mmap threshold. Once, at start, before the worker threads.
/// Returns false when the allocator is not glibc's (or refused it).
bool configure_allocator();

/// Gives the free pages of every malloc arena back to the system (malloc_trim(0)). Returns true
/// when something was given back.
bool trim_free_memory();

/// A burst postpones its trim until it is over, but no longer than this after the trim was asked for.
inline constexpr std::chrono::milliseconds kTrimLongestWait{10000};

/// When a worker trims (the timer and the call are the worker's): one worker's opens and closes
/// in, with the loop's time in milliseconds. A trim is asked for by the worker's last close, or
/// by `changes_per_trim` opens and closes; it runs kTrimDelay after the last open or close (the
/// burst is over and its TLS handshakes are done), or kTrimLongestWait after it was asked for on
/// a worker that never quiets down.
class IdleTrimPolicy {
 public:
  explicit IdleTrimPolicy(size_t changes_per_trim = kTrimAfterChanges) : changes_per_trim_(changes_per_trim) {}

  /// A connection opened. True when the trim timer is to be (re)started now, kTrimDelay long.
  bool on_open(uint64_t now_ms) { return counted(false, now_ms); }
  /// A TLS handshake finished (the burst of opens goes on until the handshakes are done).
  bool on_handshake(uint64_t now_ms) { return counted(false, now_ms); }
  /// A connection closed, `open` remain. True when the trim timer is to be (re)started now.
  bool on_close(size_t open, uint64_t now_ms) { return counted(open == 0, now_ms); }
  /// The scheduled trim ran: the count starts again.
  void trimmed() {
    scheduled_ = false;
    changes_ = 0;
  }
  bool scheduled() const { return scheduled_; }

 private:
  bool counted(bool now, uint64_t now_ms) {
    ++changes_;
    if (!scheduled_) {
      if (!now && changes_ < changes_per_trim_) return false;
      scheduled_ = true;
      asked_at_ms_ = now_ms;
      return true;
    }
    return now_ms - asked_at_ms_ < static_cast<uint64_t>(kTrimLongestWait.count());  // postpone: the burst goes on
  }

  size_t changes_per_trim_;
  size_t changes_ = 0;  ///< opens, handshakes and closes since the last trim
  bool scheduled_ = false;
  uint64_t asked_at_ms_ = 0;
};

}  // namespace kproxy::runtime
