#include "proxy/runtime/connection_balancer.h"

#include <limits>

namespace kproxy::runtime {

ConnectionBalancer::ConnectionBalancer(size_t workers) : slots_(new Slot[workers == 0 ? 1 : workers]), count_(workers == 0 ? 1 : workers) {}

size_t ConnectionBalancer::assign(size_t acceptor) {
  if (acceptor >= count_) acceptor = 0;
  size_t best = acceptor;
  int64_t best_load = slots_[acceptor].excluded.load(std::memory_order_relaxed) ? std::numeric_limits<int64_t>::max()
                                                                                : slots_[acceptor].load.load(std::memory_order_relaxed);
  for (size_t i = 0; i < count_; ++i) {
    if (i == acceptor || slots_[i].excluded.load(std::memory_order_relaxed)) continue;
    int64_t load = slots_[i].load.load(std::memory_order_relaxed);
    if (load < best_load) {
      best = i;
      best_load = load;
    }
  }
  // Two workers that accept at the same moment may both pick the same owner: off by one for a
  // moment, corrected by the next assignments.
  slots_[best].load.fetch_add(1, std::memory_order_relaxed);
  return best;
}

void ConnectionBalancer::release(size_t worker) {
  if (worker < count_) slots_[worker].load.fetch_sub(1, std::memory_order_relaxed);
}

void ConnectionBalancer::exclude(size_t worker) {
  if (worker < count_) slots_[worker].excluded.store(true, std::memory_order_relaxed);
}

int64_t ConnectionBalancer::load(size_t worker) const { return worker < count_ ? slots_[worker].load.load(std::memory_order_relaxed) : 0; }

}  // namespace kproxy::runtime
