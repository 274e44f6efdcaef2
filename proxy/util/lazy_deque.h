// LazyDeque: a std::deque that allocates nothing until the first push_back.
//
// libstdc++'s std::deque allocates its map and a first 512-byte node as soon as it is constructed
// (~576 B), even if it stays empty. Per-connection queues that are empty for most connections
// (fault-rule holds, transport-toxic pieces) or until the first request would make every idle
// connection pay that (issue 4: memory per connection small when idle). LazyDeque holds a null
// pointer instead; release() gives the memory back once the owner knows the queue is drained.
#pragma once

#include <deque>
#include <memory>

namespace kproxy::util {

template <typename T>
class LazyDeque {
 public:
  using iterator = typename std::deque<T>::iterator;

  bool empty() const { return !items_ || items_->empty(); }
  size_t size() const { return items_ ? items_->size() : 0; }
  /// True once storage is allocated (after a push_back, until release() or clear()).
  bool allocated() const { return items_ != nullptr; }

  void push_back(T&& item) {
    if (!items_) items_ = std::make_unique<std::deque<T>>();
    items_->push_back(std::move(item));
  }
  /// Precondition for front/back/pop_front: !empty().
  T& front() { return items_->front(); }
  const T& front() const { return items_->front(); }
  T& back() { return items_->back(); }
  const T& back() const { return items_->back(); }
  void pop_front() { items_->pop_front(); }
  T& operator[](size_t i) { return (*items_)[i]; }

  iterator begin() { return items_ ? items_->begin() : iterator(); }
  iterator end() { return items_ ? items_->end() : iterator(); }

  /// Drops every item and the storage.
  void clear() { items_.reset(); }
  /// Gives the storage back if nothing is queued (pop_front keeps it for the next push).
  void release_if_empty() {
    if (items_ && items_->empty()) items_.reset();
  }

 private:
  std::unique_ptr<std::deque<T>> items_;
};

}  // namespace kproxy::util
