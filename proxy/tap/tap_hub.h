// TapHub: fans decoded traffic out to /tap subscribers as JSON lines, never slowing the proxy.
//
//   worker ──► hub.wants(...)? ──► build line ──► publish(meta, line) ──► Subscriber queue (bounded)
//                (no subscriber: one relaxed load)                          │ full: drop + count
//                                                                           ▼
//                                          admin thread: Subscriber::next() ──► HTTP chunk
//
// A worker only pays for the tap while someone listens: `active()` is a relaxed load, and
// `wants()` checks the filters before any JSON is built. Each subscriber has its own bounded
// queue; when a reader cannot keep up, new events are dropped for it and counted (the count is
// reported in the stream as {"dropped": N} lines and in kproxy_tap_events_dropped_total).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/metrics/labelled_counter.h"

namespace kproxy::tap {

/// What a filter looks at, known before the event's JSON is built.
struct TapEventMeta {
  int16_t api_key = -1;
  bool response = false;
  uint64_t connection = 0;
  std::string_view client_id;
  bool has_error = false;  ///< response carries a non-zero error code (responses only)
  /// A transaction lifecycle event (docs/transactions.md), not a frame: only subscribers with
  /// `transactions` get these, and they get nothing else.
  bool transaction = false;
};

/// A subscriber's filter. Unset fields match everything.
struct TapFilter {
  std::optional<int16_t> api_key;
  std::optional<std::string> client_id;
  std::optional<uint64_t> connection;
  std::optional<bool> response;  ///< true = responses only, false = requests only
  bool errors_only = false;      ///< responses with a non-zero error code only
  bool transactions = false;     ///< transaction lifecycle events instead of frames (?transactions=true)

  bool matches(const TapEventMeta& meta) const;
  /// True when the filter can match without knowing `has_error` (so no decode is needed first).
  bool needs_error_flag() const { return errors_only; }
};

/// Parses the query parameters of GET /tap: api (name or key), client_id, connection,
/// direction (request|response), errors (true|1), transactions (true|1). Returns "" or what is wrong.
std::string parse_filter(const std::map<std::string, std::string>& query, TapFilter& out);

struct TapLimits {
  size_t max_subscribers = 4;
  size_t queue_lines = 10000;     ///< lines buffered per subscriber before dropping
  size_t queue_bytes = 16 << 20;  ///< bytes buffered per subscriber before dropping
  /// tap.records: show record contents (record_contents.h); off, records are only counted.
  bool records = false;
  size_t max_record_bytes = 256;  ///< tap.max_record_bytes
  size_t max_records = 100;       ///< tap.max_records
};

class TapHub;

class Subscriber {
 public:
  Subscriber(TapFilter filter, const TapLimits& limits) : filter_(std::move(filter)), limits_(limits) {}
  const TapFilter& filter() const { return filter_; }

  /// Waits up to `timeout` for lines; returns what is queued (possibly nothing), with a
  /// {"dropped": N} line first when events were dropped since the last call.
  std::string next(std::chrono::milliseconds timeout);
  uint64_t dropped() const { return dropped_total_.load(std::memory_order_relaxed); }
  uint64_t delivered() const { return delivered_.load(std::memory_order_relaxed); }

  /// Queues a line, or drops and counts it when the queue is full. Never blocks for long.
  bool offer(const std::string& line);
  void close();
  bool closed() const { return closed_.load(); }

 private:
  TapFilter filter_;
  TapLimits limits_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  uint64_t dropped_since_read_ = 0;
  std::atomic<uint64_t> dropped_total_{0};
  std::atomic<uint64_t> delivered_{0};
  std::atomic<bool> closed_{false};
};

class TapHub {
 public:
  explicit TapHub(TapLimits limits = {}) : limits_(limits) {}

  void set_limits(const TapLimits& limits);
  TapLimits limits() const;

  /// True when anyone listens (one relaxed load: the hot-path check).
  bool active() const { return subscriber_count_.load(std::memory_order_relaxed) > 0; }
  /// True when some subscriber's filter matches `meta` (ignoring has_error when `error_known` is
  /// false, so the caller can decide whether to decode for the error flag).
  bool wants(const TapEventMeta& meta) const;
  /// True when some subscriber that matches everything else filters on errors.
  bool any_errors_only() const;
  /// Delivers `line` (one JSON object, no newline) to every subscriber whose filter matches.
  void publish(const TapEventMeta& meta, const std::string& line);

  /// A new subscriber, or nullptr when `max_subscribers` are connected.
  std::shared_ptr<Subscriber> subscribe(TapFilter filter);
  void unsubscribe(const std::shared_ptr<Subscriber>& subscriber);
  /// Closes every subscriber (shutdown).
  void close_all();

  size_t subscriber_count() const { return subscriber_count_.load(); }
  uint64_t dropped_total() const { return dropped_total_.value(0); }
  /// kproxy_tap_events_dropped_total of this hub (the process's hub exports it).
  const metrics::LabelledCounter& dropped_counter() const { return dropped_total_; }
  uint64_t published_total() const { return published_total_.load(std::memory_order_relaxed); }

 private:
  TapLimits limits_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<Subscriber>> subscribers_;
  std::atomic<size_t> subscriber_count_{0};
  metrics::LabelledCounter dropped_total_{
      "kproxy_tap_events_dropped_total", "Tap events not delivered because a subscriber could not keep up.", "", {}};
  std::atomic<uint64_t> published_total_{0};
};

}  // namespace kproxy::tap
