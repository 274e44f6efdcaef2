#include "codec/frame_buffer.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace kproxy::codec {

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

void FrameBuffer::release() {
  std::free(data_);
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
}

}  // namespace kproxy::codec
