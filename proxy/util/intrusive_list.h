// IntrusiveList: a doubly linked list whose links live in the elements (they derive from
// IntrusiveListHook), so being in the list allocates nothing. A worker's registry of its
// connections is one: a node-based set would add a heap node and a bucket per idle connection
// (issue #20's idle-memory budget). Not thread-safe; an element is in at most one list.
#pragma once

#include <cstddef>
#include <vector>

namespace kproxy::util {

/// The links an element of an IntrusiveList carries (touched only by the list).
struct IntrusiveListHook {
  IntrusiveListHook* prev_in_list = nullptr;  ///< null for the list's head (and when not in a list)
  IntrusiveListHook* next_in_list = nullptr;
};

/// T derives from IntrusiveListHook. T may be incomplete where the list is declared.
template <typename T>
class IntrusiveList {
 public:
  IntrusiveList() = default;
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;

  /// Adds `item` at the front; nothing if it is in the list already.
  void insert(T* item) {
    IntrusiveListHook* h = item;
    if (linked(h)) return;
    h->prev_in_list = nullptr;
    h->next_in_list = head_;
    if (head_) head_->prev_in_list = h;
    head_ = h;
    ++size_;
  }
  /// Removes `item`; nothing if it is not in the list.
  void erase(T* item) {
    IntrusiveListHook* h = item;
    if (!linked(h)) return;
    if (h->prev_in_list) h->prev_in_list->next_in_list = h->next_in_list;
    else head_ = h->next_in_list;
    if (h->next_in_list) h->next_in_list->prev_in_list = h->prev_in_list;
    *h = IntrusiveListHook{};
    --size_;
  }
  bool contains(const T* item) const { return linked(static_cast<const IntrusiveListHook*>(item)); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// The elements now, newest first, for loops that may erase as they go.
  std::vector<T*> snapshot() const {
    std::vector<T*> out;
    out.reserve(size_);
    for (IntrusiveListHook* p = head_; p; p = p->next_in_list) out.push_back(static_cast<T*>(p));
    return out;
  }

 private:
  /// In this list: it has a predecessor, or it is the head (an element is in one list at most).
  bool linked(const IntrusiveListHook* h) const { return h->prev_in_list != nullptr || h == head_; }

  IntrusiveListHook* head_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kproxy::util
