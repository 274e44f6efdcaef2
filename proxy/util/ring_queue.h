// RingQueue: a FIFO in one power-of-two array that allocates nothing until the first push_back
// and gives its memory back on release_if_empty().
//
// The pipeline's queue of requests awaiting their answers (proxy/pipeline/pipeline.h) takes a push and a
// pop per request. std::deque allocates a 512-byte node every few elements and frees it again as
// the front passes, so a pipelined connection paid an allocation per couple of frames, and an
// empty deque still holds its first node and map (~600 bytes per idle connection). A ring grows
// by doubling while requests pile up, then costs no allocation per element; the owner releases
// it when the connection has nothing in flight at the end of a read (issue #20: per-frame cost and
// idle memory per connection).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>

namespace kproxy::util {

template <typename T>
class RingQueue {
 public:
  RingQueue() = default;
  ~RingQueue() { clear(); }
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  /// Room for this many elements is allocated (0 when nothing is).
  size_t capacity() const { return capacity_; }

  void push_back(T&& item) {
    if (size_ == capacity_) grow();
    new (slot(size_)) T(std::move(item));
    ++size_;
  }
  T& front() {
    assert(size_ > 0);
    return *slot(0);
  }
  T& back() {
    assert(size_ > 0);
    return *slot(size_ - 1);
  }
  /// The i-th element from the front.
  T& operator[](size_t i) {
    assert(i < size_);
    return *slot(i);
  }
  const T& operator[](size_t i) const {
    assert(i < size_);
    return *slot(i);
  }
  void pop_front() {
    assert(size_ > 0);
    slot(0)->~T();
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
  }

  /// Destroys every element and frees the array.
  void clear() {
    while (size_ > 0) pop_front();
    release_if_empty();
  }
  /// Frees the array when no element is in it.
  void release_if_empty() {
    if (size_ != 0 || capacity_ == 0) return;
    std::allocator<T>().deallocate(items_, capacity_);
    items_ = nullptr;
    capacity_ = 0;
    head_ = 0;
  }

 private:
  static constexpr uint32_t kFirstCapacity = 8;

  T* slot(size_t i) const { return items_ + ((head_ + i) & (capacity_ - 1)); }

  void grow() {
    uint32_t next = capacity_ == 0 ? kFirstCapacity : capacity_ * 2;
    T* fresh = std::allocator<T>().allocate(next);
    for (uint32_t i = 0; i < size_; ++i) {
      T* from = slot(i);
      new (fresh + i) T(std::move(*from));
      from->~T();
    }
    if (items_) std::allocator<T>().deallocate(items_, capacity_);
    items_ = fresh;
    capacity_ = next;
    head_ = 0;
  }

  T* items_ = nullptr;
  uint32_t capacity_ = 0;  ///< 0 or a power of two
  uint32_t head_ = 0;      ///< index of the front element
  uint32_t size_ = 0;
};

}  // namespace kproxy::util
