// CountedBatches: the Produce batches an open transaction has counted, for the transaction
// tracker's "a batch sent again counts once" rule (docs/transactions.md).
//
// A transactional producer sends one batch per partition per Produce; the tracker notes each
// batch's key (its partition and base sequence, hashed to 64 bits) with the connection that sent
// it. This is on the path of every transactional Produce, so the set is one flat array with open
// addressing (linear probing, at most half full): adding a batch costs no allocation once the
// array has grown, and clear() keeps a small array for the id's next transaction.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kproxy::observe {

class CountedBatches {
 public:
  /// At most this many batches per transaction are remembered; past it add() refuses (a very long
  /// transaction's later batches are then not deduplicated).
  static constexpr size_t kMaxBatches = size_t{1} << 16;

  /// The connection that sent the batch `key` first, or nullptr when the set does not have it.
  const uint64_t* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    key = stored(key);
    for (size_t i = key & mask(); slots_[i].key != 0; i = (i + 1) & mask())
      if (slots_[i].key == key) return &slots_[i].connection;
    return nullptr;
  }

  /// Notes the batch `key`, sent on `connection`; false when it is there already or the set is
  /// full (kMaxBatches).
  bool add(uint64_t key, uint64_t connection) {
    if (size_ >= kMaxBatches) return false;
    if ((size_ + 1) * 2 > slots_.size()) grow();
    key = stored(key);
    size_t i = key & mask();
    for (; slots_[i].key != 0; i = (i + 1) & mask())
      if (slots_[i].key == key) return false;
    slots_[i] = {key, connection};
    ++size_;
    return true;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  /// Forgets every batch (a new transaction). An array grown past kKeptSlots is released, so an
  /// id that once had a long transaction does not hold its memory for good.
  void clear() {
    if (slots_.size() > kKeptSlots) {
      std::vector<Slot>().swap(slots_);
    } else if (size_ != 0) {
      std::fill(slots_.begin(), slots_.end(), Slot{});
    }
    size_ = 0;
  }

 private:
  struct Slot {
    uint64_t key = 0;  ///< 0: empty
    uint64_t connection = 0;
  };
  static constexpr size_t kFirstSlots = 16;
  static constexpr size_t kKeptSlots = 256;

  /// Key 0 marks an empty slot: a batch whose key hashes to 0 is stored as 1 (the keys are
  /// hashes; two batches sharing one is as likely as any other collision).
  static uint64_t stored(uint64_t key) { return key == 0 ? 1 : key; }
  size_t mask() const { return slots_.size() - 1; }

  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? kFirstSlots : old.size() * 2, Slot{});
    for (const Slot& s : old) {
      if (s.key == 0) continue;
      size_t i = s.key & mask();
      while (slots_[i].key != 0) i = (i + 1) & mask();
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;  ///< size 0 or a power of two
  size_t size_ = 0;
};

}  // namespace kproxy::observe
