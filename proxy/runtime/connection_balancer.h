// ConnectionBalancer: which worker serves a connection that has just been accepted.
//
// The workers listen on one shared socket (proxy/runtime/listener.h) and the kernel wakes whichever loop
// it likes; libuv then accepts the whole backlog on that loop. Left alone, one worker takes a
// burst of connections while another sits idle. So the worker that accepted a connection asks
// the balancer who owns it: the worker that holds the fewest connections, the acceptor itself on
// a tie (no hand-over needed). A connection owned by another worker travels there as a socket
// descriptor through its task queue (Worker::accept). A connection counts on its owner from
// assign() until release(); a draining worker is excluded from the choice.
//
//   accept on worker A ──► assign(A) ──► A (fewest, or tie)  ──► served on A
//                                    └─► B (fewer than A)    ──► descriptor posted to B
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace kproxy::runtime {

class ConnectionBalancer {
 public:
  /// `workers` >= 1.
  explicit ConnectionBalancer(size_t workers);

  /// The worker that owns the next connection `acceptor` accepted; the connection counts there
  /// from now on. Safe from any thread. Returns `acceptor` when every worker is excluded.
  size_t assign(size_t acceptor);
  /// A connection assigned to `worker` is gone (closed, or refused before it was served).
  void release(size_t worker);
  /// `worker` drains: no connection is assigned to it from now on.
  void exclude(size_t worker);

  /// Connections `worker` owns now (the kproxy_worker_connections gauge).
  int64_t load(size_t worker) const;
  size_t workers() const { return count_; }

 private:
  /// One cache line per worker: each worker's own counter changes at its own pace.
  struct alignas(64) Slot {
    std::atomic<int64_t> load{0};
    std::atomic<bool> excluded{false};
  };
  std::unique_ptr<Slot[]> slots_;
  size_t count_;
};

}  // namespace kproxy::runtime
