#include "codec/frame_buffer.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace kproxy::codec {

namespace {

/// This thread's large blocks waiting for a FrameBuffer (FrameBuffer::kCachedBlockMin).
struct BlockCache {
  struct Block {
    void* data = nullptr;
    size_t capacity = 0;
  };
  std::array<Block, FrameBuffer::kCachedBlocks> blocks{};
  size_t count = 0;
  size_t bytes = 0;

  ~BlockCache() { drop(); }
  /// The smallest kept block of at least `n` bytes, taken out of the cache (or none).
  Block take(size_t n) {
    size_t best = count;
    for (size_t i = 0; i < count; ++i)
      if (blocks[i].capacity >= n && (best == count || blocks[i].capacity < blocks[best].capacity)) best = i;
    if (best == count) return {};
    Block b = blocks[best];
    blocks[best] = blocks[--count];
    bytes -= b.capacity;
    return b;
  }
  bool keep(void* data, size_t capacity) {
    if (capacity < FrameBuffer::kCachedBlockMin || capacity > FrameBuffer::kCachedBlockMax) return false;
    if (count == blocks.size() || bytes + capacity > FrameBuffer::kCachedBytes) return false;
    blocks[count++] = {data, capacity};
    bytes += capacity;
    return true;
  }
  size_t drop() {
    size_t freed = bytes;
    for (size_t i = 0; i < count; ++i) std::free(blocks[i].data);
    count = 0;
    bytes = 0;
    return freed;
  }
};

thread_local BlockCache block_cache;

}  // namespace

size_t FrameBuffer::drop_cached_blocks() { return block_cache.drop(); }
size_t FrameBuffer::cached_bytes() { return block_cache.bytes; }

FrameBuffer::FrameBuffer(FrameBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), capacity_(std::exchange(other.capacity_, 0)) {}

FrameBuffer& FrameBuffer::operator=(FrameBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void FrameBuffer::reserve(size_t n) {
  if (n <= capacity_) return;
  if (n >= kCachedBlockMin) {
    // A kept block whose pages are already there, rather than new ones: what is held so far
    // (a buffer grows from the part of a frame received) is copied over.
    if (BlockCache::Block b = block_cache.take(n); b.data) {
      if (size_ > 0) std::memcpy(b.data, data_, size_);
      if (data_ != nullptr && !block_cache.keep(data_, capacity_)) std::free(data_);
      data_ = static_cast<uint8_t*>(b.data);
      capacity_ = b.capacity;
      return;
    }
  }
  // realloc keeps the contents; for a block glibc mapped on its own it moves pages (mremap)
  // rather than bytes.
  void* p = std::realloc(data_, n);
  if (p == nullptr) throw std::bad_alloc();
  data_ = static_cast<uint8_t*>(p);
  capacity_ = n;
}

void FrameBuffer::append(Bytes bytes) {
  if (bytes.empty()) return;
  if (capacity_ - size_ < bytes.size()) reserve(std::max(size_ + bytes.size(), 2 * capacity_));
  std::memcpy(data_ + size_, bytes.data(), bytes.size());
  size_ += bytes.size();
}

void FrameBuffer::commit(size_t n) {
  assert(n <= capacity_ - size_);
  size_ += n;
}

void FrameBuffer::drop_front(size_t n) {
  assert(n <= size_);
  if (n < size_) std::memmove(data_, data_ + n, size_ - n);
  size_ -= n;
}

void FrameBuffer::release() {
  if (data_ == nullptr || !block_cache.keep(data_, capacity_)) std::free(data_);
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
}

}  // namespace kproxy::codec
