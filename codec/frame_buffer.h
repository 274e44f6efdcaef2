// FrameBuffer: an owned, growable byte buffer that holds one frame (or a run of frames) and can
// be moved from the reader that gathered it to the write queue that sends it, without a copy.
//
// Unlike std::vector<uint8_t>, growing it does not zero the new bytes: the spare room after size()
// can be handed to recv()/uv_read as the destination of the next read (spare() then commit()),
// so a large frame is written by the kernel straight into its final place. Memory comes from
// malloc/realloc, so glibc can grow a large buffer with mremap instead of copying it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "codec/reader.h"

namespace kproxy::codec {

class FrameBuffer {
 public:
  FrameBuffer() = default;
  ~FrameBuffer() { release(); }
  FrameBuffer(FrameBuffer&& other) noexcept;
  FrameBuffer& operator=(FrameBuffer&& other) noexcept;
  FrameBuffer(const FrameBuffer&) = delete;
  FrameBuffer& operator=(const FrameBuffer&) = delete;

  const uint8_t* data() const { return data_; }
  uint8_t* data() { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  Bytes bytes() const { return Bytes(data_, size_); }

  /// Makes room for at least `n` bytes in all, keeping the contents (exactly `n`: the caller
  /// decides the growth policy). Throws std::bad_alloc when memory is exhausted.
  void reserve(size_t n);
  /// Appends a copy of `bytes`, growing geometrically when needed.
  void append(Bytes bytes);
  /// The room after size() that reserve() made: read into it, then commit() what was written.
  std::span<uint8_t> spare() { return std::span<uint8_t>(data_ + size_, capacity_ - size_); }
  /// Counts `n` bytes written into spare() as part of the contents.
  void commit(size_t n);
  /// Drops the first `n` bytes of the contents and moves the rest to the front (capacity kept).
  void drop_front(size_t n);
  /// Empties the buffer and gives its memory back (a large block to this thread's cache, below).
  void release();

  /// Large blocks (kCachedBlockMin and up) are kept per thread for the next buffer that needs
  /// one, instead of going back to the system: a block that large is a mapping of its own (the
  /// allocator's mmap threshold), and a fresh one costs a page fault and a zeroed page per 4 KiB
  /// touched. At 1 MiB frames that was a third of kproxy's CPU (issue #35). At most
  /// kCachedBlocks blocks and kCachedBytes in all per thread.
  static constexpr size_t kCachedBlockMin = 128 << 10;
  static constexpr size_t kCachedBlockMax = 4 << 20;
  static constexpr size_t kCachedBlocks = 4;
  static constexpr size_t kCachedBytes = 8 << 20;
  /// Frees this thread's cached blocks (a worker calls it when it goes idle). Returns the bytes freed.
  static size_t drop_cached_blocks();
  /// Bytes in this thread's cache.
  static size_t cached_bytes();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace kproxy::codec
