// TraceExporter: OpenTelemetry spans sent to a collector with OTLP/HTTP, JSON encoding
// (docs/transactions.md "Traces"), batched on a thread of its own.
//
//   worker threads ──try_push (all spans of one trace, or none)──► bounded queue ──► exporter thread
//                                                                                   batches, POSTs
//                                                                                   /v1/traces
//
// A worker never waits for the collector: try_push takes the queue's mutex for the time of a
// vector append, and when the spans do not fit (the collector is slow or down and the queue is
// full) they are dropped and counted. The exporter thread sends a batch when `batch_max_spans`
// are waiting or `batch_interval` has passed since the oldest waiting span arrived, one POST at
// a time, each bounded by `timeout`; a batch the collector refuses or does not answer in time is
// dropped and counted (no retry: the queue behind it keeps filling meanwhile). stop() sends what
// is queued within the timeout and drops the rest.
//
// The HTTP client is kproxy's own: plain HTTP/1.1 over TCP, one connection per POST
// (Connection: close), the answer's status line is all it reads.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "codec/hex.h"

namespace kproxy::observe {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

/// A span attribute: a string or an integer (OTLP's stringValue / intValue).
struct SpanAttribute {
  std::string key;
  std::variant<std::string, int64_t> value;
};

/// One finished span, as OTLP carries it.
struct Span {
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};  ///< all zero: a root span
  std::string name;
  uint64_t start_unix_nano = 0;
  uint64_t end_unix_nano = 0;
  bool error = false;          ///< status ERROR (code 2), else UNSET
  std::string status_message;  ///< with `error`
  std::vector<SpanAttribute> attributes;
};

/// Lower-case hex of `bytes` (codec/hex.h).
using codec::to_hex;

/// The OTLP/HTTP JSON body (ExportTraceServiceRequest, protobuf JSON mapping) of `spans`: one
/// resourceSpans with service.name = `service_name`, one scopeSpans (scope "kproxy").
std::string encode_otlp_json(const std::vector<Span>& spans, std::string_view service_name);

/// Where and how a POST goes.
struct HttpTarget {
  std::string host;
  uint16_t port = 0;
  std::string path = "/";
};

/// The outcome of one POST: the HTTP status (0 when none came) and, when it failed, why.
struct HttpPostResult {
  int status = 0;
  std::string error;  ///< "" for a 2xx answer
  bool ok() const { return error.empty(); }
};

/// One HTTP/1.1 POST over a new TCP connection (Connection: close), all of it (resolve,
/// connect, send, the status line) within `timeout`. Blocking: call it off the loop threads.
HttpPostResult http_post(const HttpTarget& target, std::string_view content_type, std::string_view body, std::chrono::milliseconds timeout);

struct TraceExporterOptions {
  HttpTarget target;
  std::string service_name = "kproxy";
  size_t max_queue_spans = 2048;
  size_t batch_max_spans = 512;
  std::chrono::milliseconds batch_interval{1000};
  std::chrono::milliseconds timeout{5000};
  /// Called on the exporter thread about every batch_interval, outside the queue's lock (the
  /// tracker's sweep: transactions that time out end, and so are exported, without a scrape).
  std::function<void()> tick;
  /// The POST (tests replace it); defaults to http_post.
  std::function<HttpPostResult(const HttpTarget&, std::string_view, std::string_view, std::chrono::milliseconds)> post;
};

/// Counts since the start (the metrics read them).
struct TraceExporterStats {
  uint64_t exported = 0;               ///< spans the collector accepted (2xx)
  uint64_t dropped_queue_full = 0;     ///< spans refused by try_push: the queue was full
  uint64_t dropped_export_failed = 0;  ///< spans of batches the collector refused or did not answer
  uint64_t dropped_shutdown = 0;       ///< spans still queued when stop()'s deadline passed, or pushed after it
  uint64_t export_failures = 0;        ///< POSTs that failed
  uint64_t batches = 0;                ///< POSTs that succeeded
  size_t queued = 0;                   ///< spans waiting now
};

class TraceExporter {
 public:
  explicit TraceExporter(TraceExporterOptions options);
  ~TraceExporter();
  TraceExporter(const TraceExporter&) = delete;
  TraceExporter& operator=(const TraceExporter&) = delete;

  /// Starts the exporter thread.
  void start();
  /// Queues all of `spans` or, when they do not fit (or the exporter has stopped), none: never
  /// blocks for more than the append. True when queued.
  bool try_push(std::vector<Span>&& spans);
  /// Sends what is queued, for at most the options' timeout, drops (and counts) the rest, and
  /// joins the thread. Later pushes are refused. Idempotent.
  void stop();

  TraceExporterStats stats() const;
  const TraceExporterOptions& options() const { return options_; }

 private:
  void run();
  /// POSTs `batch` and counts the outcome.
  void send(std::vector<Span>& batch, std::chrono::milliseconds timeout);

  TraceExporterOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Span> queue_;
  std::chrono::steady_clock::time_point oldest_{};  ///< when the oldest queued span arrived
  bool stopping_ = false;
  bool last_failed_ = false;  ///< the last POST failed (exporter thread only: logs once per run of failures)
  std::thread thread_;
  std::atomic<uint64_t> exported_{0}, dropped_queue_full_{0}, dropped_export_failed_{0}, dropped_shutdown_{0}, export_failures_{0},
      batches_{0};
};

}  // namespace kproxy::observe
