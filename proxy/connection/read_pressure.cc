#include "proxy/connection/read_pressure.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>

#include "proxy/metrics/proxy_metrics.h"

namespace kproxy::connection {

ReadPauseMetrics::ReadPauseMetrics(metrics::ProxyMetrics& metrics)
    : paused_(std::make_shared<std::atomic<int64_t>>(0)),
      counter_(metrics.labelled_counter("kproxy_proxy_reads_paused_total",
                                        "Times kproxy stopped reading a client: reason=\"frame_memory\", its partial request was among "
                                        "the largest while partial frames held more than limits.max_buffered_frame_bytes; "
                                        "reason=\"write_queue\", the broker's write queue was above its high-water mark (backpressure).",
                                        "reason", {"frame_memory", "write_queue"})) {
  metrics.add_gauge("kproxy_proxy_reads_paused",
                    "Client connections kproxy is not reading now: reason=\"frame_memory\", partial frames of all connections hold "
                    "more than limits.max_buffered_frame_bytes and these hold the most.",
                    "reason", [paused = paused_] {
                      return std::vector<std::pair<std::string, double>>{{"frame_memory", double(paused->load(std::memory_order_relaxed))}};
                    });
}

void ReadPauseMetrics::count(ReadPauseReason reason) { counter_.add(static_cast<size_t>(reason)); }

PressurePlan plan_read_pressure(std::span<const PressureHolder> holders, size_t used, size_t limit, size_t allowance, size_t reserve) {
  PressurePlan plan;
  const size_t resume_mark = limit - limit / 8;
  if (limit == 0 || used <= resume_mark) {
    for (size_t i = 0; i < holders.size(); ++i)
      if (holders[i].paused) plan.resume.push_back(i);
    return plan;
  }
  if (used <= limit) return plan;
  std::vector<size_t> large;
  for (size_t i = 0; i < holders.size(); ++i) {
    if (holders[i].held > reserve) large.push_back(i);
    else if (holders[i].paused) plan.resume.push_back(i);  // back under the reserve (never paused for it)
  }
  // The frames closest to complete may finish within the allowance: they free memory soonest.
  std::sort(large.begin(), large.end(), [&](size_t a, size_t b) { return holders[a].missing < holders[b].missing; });
  std::vector<bool> finishing(holders.size(), false);
  size_t budgeted = 0;
  for (size_t i : large) {
    if (holders[i].missing > allowance - budgeted) break;
    budgeted += holders[i].missing;
    finishing[i] = true;
    if (holders[i].paused) plan.resume.push_back(i);
  }
  // The rest stop, largest first.
  std::sort(large.begin(), large.end(), [&](size_t a, size_t b) { return holders[a].held > holders[b].held; });
  for (size_t i : large)
    if (!finishing[i] && !holders[i].paused) plan.pause.push_back(i);
  return plan;
}

ReadPressure::ReadPressure(uv_loop_t* loop, const util::Clock& clock, codec::FrameMemoryBudget& budget, ReadPauseMetrics& metrics)
    : budget_(budget), metrics_(metrics), recheck_(loop, clock, [this] {
        rebalance();
        schedule_recheck();
      }) {}

ReadPressure::~ReadPressure() { metrics_.add_paused(-static_cast<int64_t>(paused_)); }

void ReadPressure::after_read(PausableReader& reader) {
  size_t held = reader.partial_bytes();
  if (entries_.empty() && held <= codec::kFrameMemoryReserve) return;  // the common case: nothing large anywhere
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.reader == &reader; });
  if (it == entries_.end()) {
    if (held > codec::kFrameMemoryReserve) entries_.push_back({&reader, false});
  } else if (held <= codec::kFrameMemoryReserve && !it->paused) {
    entries_.erase(it);
  }
  if (budget_.over_limit() || (paused_ > 0 && budget_.used() <= budget_.resume_mark())) rebalance();
}

void ReadPressure::forget(PausableReader& reader) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.reader == &reader; });
  if (it == entries_.end()) return;
  if (it->paused) {
    --paused_;
    metrics_.add_paused(-1);
  }
  entries_.erase(it);
  if (paused_ > 0) rebalance();  // the memory it held may let others go on
}

void ReadPressure::set_paused(Entry& e, bool paused) {
  if (e.paused == paused) return;
  e.paused = paused;
  if (paused) {
    ++paused_;
    metrics_.add_paused(1);
    metrics_.count(ReadPauseReason::kFrameMemory);
  } else {
    --paused_;
    metrics_.add_paused(-1);
  }
}

void ReadPressure::rebalance() {
  if (entries_.empty()) return;
  std::vector<PressureHolder> holders;
  holders.reserve(entries_.size());
  for (const Entry& e : entries_) holders.push_back({e.reader->partial_bytes(), e.reader->partial_missing(), e.paused});
  const size_t used = budget_.used(), limit = budget_.limit();
  PressurePlan plan = plan_read_pressure(holders, used, limit, allowance());
  // Entries are looked up by reader: pausing or resuming never changes entries_, but keep the
  // readers first so that the plan's indexes stay meaningful whatever the callbacks do.
  std::vector<PausableReader*> pause, resume;
  for (size_t i : plan.pause) pause.push_back(entries_[i].reader);
  for (size_t i : plan.resume) resume.push_back(entries_[i].reader);
  for (PausableReader* r : pause) {
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.reader == r; });
    if (it == entries_.end()) continue;
    set_paused(*it, true);
    r->pause_reads("partial frames of all connections hold " + std::to_string(used) + " bytes, more than " + std::to_string(limit) +
                   " (limits.max_buffered_frame_bytes), and this one holds " + std::to_string(r->partial_bytes()) + " bytes of a request " +
                   std::to_string(r->partial_missing()) + " bytes short of whole (the largest holders stop first)");
  }
  for (PausableReader* r : resume) {
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.reader == r; });
    if (it == entries_.end()) continue;
    set_paused(*it, false);
    r->resume_reads();
  }
  // Resumed holders that no longer hold more than the reserve need no tracking.
  std::erase_if(entries_, [](const Entry& e) { return !e.paused && e.reader->partial_bytes() <= codec::kFrameMemoryReserve; });
  schedule_recheck();
}

void ReadPressure::schedule_recheck() {
  if (stopped_ || paused_ == 0) {
    recheck_.cancel();
    return;
  }
  recheck_.arm_after(kRecheck);
}

void ReadPressure::stop() {
  stopped_ = true;
  recheck_.cancel();
}

}  // namespace kproxy::connection
