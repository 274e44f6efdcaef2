// ReadPressure: when the partial frames of all connections hold more than
// limits.max_buffered_frame_bytes, stop reading the clients that hold the most, instead of
// refusing whichever connection asks next.
//
// The budget (codec/frame_memory_budget.h) counts the bytes of partial frames really received,
// requests and responses alike, and never refuses them. Over its limit, each worker's
// ReadPressure pauses reading (uv_read_stop) the client connections of its loop whose partial
// request holds more than kFrameMemoryReserve, largest first — the ones that made the budget
// tight — and reads them again once the budget is down to its resume mark (seven eighths). The
// same answer Kafka gives to queued.max.request.bytes (a broker mutes the channels that would
// need memory: SocketServer / MemoryPool, KIP-72), aimed at the holders:
//
//  * a partial frame of at most kFrameMemoryReserve (1 MiB) is never paused nor refused, so small
//    requests go through however full the budget is;
//  * broker responses are never paused or refused for the budget (a consumer's fetch answer does
//    not wait for other clients' requests); they count in it, and so can pause those clients;
//  * frames close to complete keep going: the holders whose missing bytes together fit the
//    worker's allowance (a sixteenth of the limit), fewest missing first, finish and free their
//    memory — without it, large legitimate requests arriving together would all stop and wait;
//  * a paused connection keeps its deadlines (limits.request_completion_timeout): a client that
//    stalls its frame on purpose is closed by its own deadline, not held for good.
//
// What kproxy then holds is bounded by the limit, plus each worker's allowance, plus up to the
// reserve per connection, plus one read per connection in flight when the limit is passed.
//
// Every call is made on the worker's loop thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <uv.h>

#include "codec/frame_memory_budget.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/deadline_timer.h"

namespace kproxy::connection {

/// A connection whose client side ReadPressure may stop reading (ClientConnection).
class PausableReader {
 public:
  virtual ~PausableReader() = default;
  /// Bytes of the partial request frame it holds now.
  virtual size_t partial_bytes() const = 0;
  /// Bytes that frame still misses.
  virtual size_t partial_missing() const = 0;
  /// Stops reading the client until resume_reads(); `why` says why, for the log.
  virtual void pause_reads(const std::string& why) = 0;
  /// Reads the client again (unless something else, such as write backpressure, holds it).
  virtual void resume_reads() = 0;
};

/// One tracked holder, as the policy sees it.
struct PressureHolder {
  size_t held = 0;
  size_t missing = 0;
  bool paused = false;
};

/// What to do with the holders: indexes into them, `pause` largest holder first.
struct PressurePlan {
  std::vector<size_t> pause;
  std::vector<size_t> resume;
};

/// The policy, without a loop. `used` and `limit` are the budget's (limit 0: no limit),
/// `allowance` the bytes the holders closest to complete may still add over the limit.
///   used > limit:          holders above the reserve are paused, largest first, but for those,
///                          fewest missing bytes first, whose missing bytes add up to at most
///                          `allowance` (they are resumed if paused);
///   used <= resume mark:   every paused holder is resumed (so is every one when limit is 0);
///   in between:            nothing changes.
PressurePlan plan_read_pressure(std::span<const PressureHolder> holders, size_t used, size_t limit, size_t allowance,
                                size_t reserve = codec::kFrameMemoryReserve);

/// Why a client's reads were paused (kproxy_proxy_reads_paused_total{reason}): "frame_memory"
/// (ReadPressure) or "write_queue" (the other side's write queue is above its high-water mark,
/// proxy/net/tcp_stream.h).
enum class ReadPauseReason : uint8_t { kFrameMemory = 0, kWriteQueue = 1 };

/// What every loop's ReadPressure counts in: kproxy_proxy_reads_paused_total{reason} and the gauge
/// kproxy_proxy_reads_paused{reason="frame_memory"} (clients paused now, over all loops). One per
/// Proxy, registered in `metrics` when made (both families show from the first scrape, at 0).
class ReadPauseMetrics {
 public:
  explicit ReadPauseMetrics(metrics::ProxyMetrics& metrics);
  void count(ReadPauseReason reason);
  /// Clients paused by ReadPressure now, over all loops.
  int64_t paused_for_memory() const { return paused_->load(std::memory_order_relaxed); }
  void add_paused(int64_t delta) { paused_->fetch_add(delta, std::memory_order_relaxed); }

 private:
  std::shared_ptr<std::atomic<int64_t>> paused_;  ///< shared with the gauge's reader
  metrics::LabelledCounter& counter_;
};

class ReadPressure {
 public:
  /// Paused holders are checked again every kRecheck (the budget is shared with the other
  /// workers: memory they free wakes nobody here).
  static constexpr std::chrono::milliseconds kRecheck{100};

  ReadPressure(uv_loop_t* loop, const util::Clock& clock, codec::FrameMemoryBudget& budget, ReadPauseMetrics& metrics);
  ~ReadPressure();
  ReadPressure(const ReadPressure&) = delete;
  ReadPressure& operator=(const ReadPressure&) = delete;

  /// After a read from `reader`'s client: tracks it while its partial frame is above the reserve,
  /// and pauses or resumes holders as the budget asks.
  void after_read(PausableReader& reader);
  /// `reader` is closing: forgets it (a paused one no longer counts as paused).
  void forget(PausableReader& reader);
  /// Applies the policy to the tracked holders now.
  void rebalance();
  /// The loop is closing: no more rechecks.
  void stop();

  size_t tracked() const { return entries_.size(); }
  size_t paused() const { return paused_; }
  /// A client of this loop stopped being read because its broker's write queue is full.
  void count_write_queue_pause() { metrics_.count(ReadPauseReason::kWriteQueue); }
  /// The worker's allowance for frames close to complete (see above).
  size_t allowance() const { return budget_.limit() / 16; }

 private:
  struct Entry {
    PausableReader* reader;
    bool paused;
  };
  void set_paused(Entry& e, bool paused);
  void schedule_recheck();

  codec::FrameMemoryBudget& budget_;
  ReadPauseMetrics& metrics_;
  std::vector<Entry> entries_;
  size_t paused_ = 0;
  net::DeadlineTimer recheck_;
  bool stopped_ = false;
};

}  // namespace kproxy::connection
