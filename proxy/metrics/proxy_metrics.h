// ProxyMetrics: kproxy's per-API Prometheus metrics, counted without locks on the hot path.
//
//   worker thread ──► MetricsShard (its own; plain relaxed load+store, single writer)
//   worker thread ──► MetricsShard                                  │
//                                                                   ▼ sum at scrape time
//   GET /metrics ──► ProxyMetrics::render() ──► prometheus::MetricFamily ──► TextSerializer
//
// Every thread that counts gets its own shard on first use (a thread_local pointer, resolved
// once), so an increment is one load and one store to a cache line no other thread writes.
// Tables are indexed by api key × version (and error code, latency bucket), so nothing is
// looked up by name per frame. Scrapes read the shards with relaxed loads (a scrape may see a
// request counted and its response not yet: fine for Prometheus).
//
// Rare events (fault injected, client software seen, connection closed) take a mutex.
// prometheus-cpp's own Histogram::Observe takes a mutex per observation; ours does not.
//
// The families ProxyMetrics makes itself and the proxy's own events (ProxyEvent) are declared
// once, with their types, label names and help texts, in KPROXY_METRIC_FAMILIES
// (proxy/metrics/metric_families.h). Other layers add theirs at run time (labelled_counter,
// export_counter, add_gauge, add_family_reader, add_histogram_reader).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <prometheus/metric_family.h>

#include "proxy/metrics/labelled_counter.h"
#include "proxy/metrics/metric_families.h"
#include "proxy/net/close_reason.h"

namespace kproxy::metrics {

class LabelValues;

/// Api keys 0..kApiSlots-2 get their own slot; any other key counts in the last ("other") slot.
inline constexpr int kApiSlots = 128;
/// Versions 0..kVersionSlots-2 get their own slot; others (and negative) the last one.
inline constexpr int kVersionSlots = 32;
/// Error codes -1..kErrorSlots-2 get their own slot (index code + 1); others the last one.
inline constexpr int kErrorSlots = 160;
/// Latency bucket upper bounds in seconds: 100 µs to 30 s.
inline constexpr std::array<double, 17> kLatencyBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                           0.1,    0.25,    0.5,    1.0,   2.5,    5.0,   10.0, 30.0};
/// Residence bucket upper bounds in seconds (a frame's time inside kproxy): 5 µs to 1 s.
inline constexpr std::array<double, 12> kResidenceBuckets = {0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025,
                                                             0.0005,   0.001,   0.0025,   0.01,    0.1,    1.0};
/// Listeners with their own slots (a config with more counts the rest in the last one).
inline constexpr size_t kMaxListeners = 16;
/// Pipeline stages that can rewrite frames (by name, registered once).
inline constexpr int kMaxStages = 16;

enum class Side : uint8_t { kClient = 0, kUpstream = 1 };
enum class Direction : uint8_t { kRequest = 0, kResponse = 1 };

/// Why a frame went through without its body being decoded (or why decoding failed).
enum class UndecodedReason : uint8_t {
  kUnknownApi = 0,      ///< api key the codec does not know
  kUnknownVersion = 1,  ///< version outside the codec's range
  kNotNeeded = 2,       ///< nobody needed the body (lazy decoding)
  kSaslRawToken = 3,    ///< SASL v0 raw token frame
  kCount = 4,
};
const char* undecoded_reason_name(UndecodedReason reason);

enum class DecodeErrorReason : uint8_t {
  kHeader = 0,   ///< the request or response header did not parse
  kBody = 1,     ///< the body did not parse
  kFraming = 2,  ///< bad size prefix
  kCount = 3,
};
const char* decode_error_reason_name(DecodeErrorReason reason);

using Counter = std::atomic<uint64_t>;

/// The frames of one read noted for residence (ConnectionMetrics::forwarded), by API: a read
/// with frames of more than kApis APIs observes the first ones only. Loop thread only.
struct ResidencePending {
  static constexpr uint8_t kApis = 4;
  std::array<int16_t, kApis> apis{};
  std::array<uint32_t, kApis> frames{};
  uint8_t used = 0;
  void note(int16_t api) {
    for (uint8_t i = 0; i < used; ++i) {
      if (apis[i] == api) {
        ++frames[i];
        return;
      }
    }
    if (used < kApis) {
      apis[used] = api;
      frames[used++] = 1;
    }
  }
};

/// One thread's counters. Only the owning thread writes; scrapes read.
struct alignas(64) MetricsShard {
  struct PerListener {
    std::array<std::array<Counter, kVersionSlots>, kApiSlots> requests{};
    std::array<std::array<Counter, kVersionSlots>, kApiSlots> responses{};
    std::array<std::atomic<int64_t>, 2> connections{};  ///< by Side
    std::array<Counter, 2> opened{};                    ///< by Side
  };
  explicit MetricsShard(size_t listener_count) : listeners(new PerListener[listener_count]), listener_count(listener_count) {}
  std::unique_ptr<PerListener[]> listeners;  ///< one per configured listener (at shard creation)
  size_t listener_count;
  std::array<Counter, kApiSlots> request_bytes{};
  std::array<Counter, kApiSlots> response_bytes{};
  std::array<std::array<Counter, kErrorSlots>, kApiSlots> errors{};
  /// Per api: counts per bucket (not cumulative), the +Inf overflow last, and the sum in ns.
  std::array<std::array<Counter, kLatencyBuckets.size() + 1>, kApiSlots> latency_buckets{};
  std::array<Counter, kApiSlots> latency_sum_ns{};
  /// Per direction (Direction) and api: residence counts per bucket (+Inf last) and the sum in ns.
  std::array<std::array<std::array<Counter, kResidenceBuckets.size() + 1>, kApiSlots>, 2> residence_buckets{};
  std::array<std::array<Counter, kApiSlots>, 2> residence_sum_ns{};
  std::array<ResidencePending, 2> residence_pending{};  ///< by Direction; the owner's scratch, never read by scrapes
  std::array<std::array<Counter, static_cast<size_t>(UndecodedReason::kCount)>, kApiSlots> undecoded{};
  std::array<std::array<std::array<Counter, static_cast<size_t>(DecodeErrorReason::kCount)>, 2>, kApiSlots> decode_errors{};
  std::array<std::array<Counter, kMaxStages>, kApiSlots> rewritten{};
  std::array<Counter, static_cast<size_t>(ProxyEvent::kCount)> events{};
  std::atomic<int64_t> inflight{0};
};

/// Single-writer increment: the shard's owner is the only writer, so no locked instruction.
inline void add(Counter& c, uint64_t n = 1) { c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
inline void add(std::atomic<int64_t>& c, int64_t n) { c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }

inline size_t api_slot(int16_t api_key) { return api_key >= 0 && api_key < kApiSlots - 1 ? static_cast<size_t>(api_key) : kApiSlots - 1; }
inline size_t version_slot(int16_t version) {
  return version >= 0 && version < kVersionSlots - 1 ? static_cast<size_t>(version) : kVersionSlots - 1;
}
inline size_t error_slot(int16_t code) { return code >= -1 && code < kErrorSlots - 1 ? static_cast<size_t>(code + 1) : kErrorSlots - 1; }
size_t latency_bucket(std::chrono::nanoseconds latency);
size_t residence_bucket(std::chrono::nanoseconds residence);
/// Counts `frames` frames of `api` that spent `residence` inside kproxy, in `shard` (its owner's).
void observe_residence(MetricsShard& shard, Direction direction, int16_t api, std::chrono::nanoseconds residence, uint64_t frames = 1);

/// Options for label values that could grow without bound.
struct MetricsOptions {
  /// Distinct (software name, version) pairs kept in kproxy_clients; more count as "other".
  size_t max_client_software = 64;
  /// Distinct fault rules kept in kproxy_faults_injected_total; more count as rule="other".
  size_t max_fault_rules = 256;
};

class ProxyMetrics {
 public:
  explicit ProxyMetrics(MetricsOptions options = {});
  ~ProxyMetrics();
  ProxyMetrics(const ProxyMetrics&) = delete;
  ProxyMetrics& operator=(const ProxyMetrics&) = delete;

  /// Names listener slots (labels); index = position in the config's listeners.
  void set_listener_names(std::vector<std::string> names);
  /// The id of a rewriting stage by name (e.g. "api_versions", "broker_address"); resolve once.
  int stage_id(std::string_view name);

  /// The calling thread's shard (created on first use; stays valid for the object's life).
  MetricsShard& shard();

  // Hot path (calling thread's shard).
  void request(size_t listener, int16_t api, int16_t version, size_t bytes);
  /// `observe_latency` false for answers kproxy gave itself (no broker round trip).
  void response(size_t listener, int16_t api, int16_t version, size_t bytes, std::chrono::nanoseconds latency, bool observe_latency = true);
  void response_error(int16_t api, int16_t error_code);
  void undecoded(int16_t api, UndecodedReason reason);
  void decode_error(int16_t api, Direction direction, DecodeErrorReason reason);
  void rewritten(int16_t api, int stage);
  void inflight(int64_t delta);
  void connection_opened(size_t listener, Side side);
  void connection_closed(size_t listener, Side side);
  void count(ProxyEvent event, uint64_t n = 1) { add(shard().events[static_cast<size_t>(event)], n); }

  // Rare events (mutex).
  void connection_close_reason(size_t listener, net::CloseCategory reason);
  void fault_injected(std::string_view rule, int16_t api, std::string_view action);
  /// One kproxy_clients series ("name\0version", or the "other" series past the cap). Valid for
  /// the life of the ProxyMetrics: series are never removed (a count may go back to 0).
  using ClientSeries = const std::string*;
  /// A client announced its software (ApiVersions v3+): counts one in its series and returns it;
  /// client_gone(series) when the connection closes or announces something else.
  ClientSeries client_seen(std::string_view software_name, std::string_view software_version);
  void client_gone(ClientSeries series);
  /// True when `series` is the one `software_name`/`software_version` count in (not folded).
  static bool is_series_of(ClientSeries series, std::string_view software_name, std::string_view software_version);

  /// Turns on the opt-in labels (metrics.topic_labels / client_id_labels), each with at most
  /// `max_values` distinct values. Call once before traffic flows.
  void enable_traffic_labels(bool topics, bool client_ids, size_t max_values);
  /// nullptr while the label is off. Stable once traffic flows.
  LabelValues* topic_labels() const { return topic_labels_.get(); }
  LabelValues* client_id_labels() const { return client_id_labels_.get(); }

  /// The counter family `name` (labelled_counter.h), made on first call with `help`, `label` and
  /// `values`; later calls with the same name return the same family. Valid for the
  /// ProxyMetrics' life; exported with every scrape.
  LabelledCounter& labelled_counter(const std::string& name, const std::string& help, const std::string& label = {},
                                    std::vector<std::string> values = {});
  /// Exports a counter family owned elsewhere (an object that lives as long as this one, e.g. the
  /// process's tap hub); one with the name of an exported family replaces it.
  void export_counter(const LabelledCounter& counter);
  /// A gauge family read at scrape time from state that lives elsewhere (connections per
  /// worker, tap subscribers): `read` returns (label value, value) pairs, one pair with an empty
  /// label value when `label` is empty. Registering `name` again replaces the reader.
  using GaugeReader = std::function<std::vector<std::pair<std::string, double>>()>;
  void add_gauge(const std::string& name, const std::string& help, const std::string& label, GaugeReader read);
  /// The general form: a gauge or counter family read at scrape time, with any number of labels;
  /// `read` returns (label values in the order of `labels`, value) pairs. For counters the state
  /// read must only grow (the transaction tracker's totals). Registering `name` again replaces it.
  enum class ReadType : uint8_t { kGauge, kCounter };
  using Reading = std::pair<std::vector<std::string>, double>;
  using FamilyReader = std::function<std::vector<Reading>()>;
  void add_family_reader(const std::string& name, const std::string& help, ReadType type, std::vector<std::string> labels,
                         FamilyReader read);
  /// A histogram family read at scrape time (the transaction tracker's durations), exported in
  /// Prometheus histogram form: cumulative `_bucket{le}` series, `_sum` and `_count`. `read`
  /// returns one reading per series: its label values (in the order of `labels`), the number of
  /// observations in each bucket of `bounds` (not cumulative: an observation counts in the first
  /// bucket whose bound is >= it) and then the +Inf overflow (so `bounds.size() + 1` counts), and
  /// the sum of the observations. The state read must only grow. Registering `name` again (as
  /// any kind of family) replaces it.
  struct HistogramReading {
    std::vector<std::string> labels;
    std::vector<uint64_t> buckets;
    double sum = 0;
  };
  using HistogramReader = std::function<std::vector<HistogramReading>()>;
  void add_histogram_reader(const std::string& name, const std::string& help, std::vector<std::string> labels, std::vector<double> bounds,
                            HistogramReader read);

  /// Every family, summed over shards.
  std::vector<prometheus::MetricFamily> collect() const;
  /// The Prometheus text exposition (format 0.0.4).
  std::string render() const;

  /// Totals for tests: summed over shards and listeners.
  uint64_t requests_total(int16_t api) const;
  uint64_t responses_total(int16_t api) const;
  uint64_t errors_total(int16_t api, int16_t error_code) const;
  uint64_t latency_count(int16_t api) const;
  uint64_t residence_count(int16_t api, Direction direction) const;
  uint64_t fault_injections(std::string_view rule) const;
  uint64_t total(ProxyEvent event) const;

 private:
  MetricsOptions options_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<MetricsShard>> shards_;
  std::vector<std::string> listener_names_;
  std::vector<std::string> stage_names_;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> faults_;
  std::map<std::string, int64_t> clients_;  ///< key "name\0version"
  std::map<std::pair<std::string, std::string>, uint64_t> close_reasons_;
  std::vector<std::unique_ptr<LabelledCounter>> counters_;
  std::vector<const LabelledCounter*> exported_counters_;
  struct ReadFamily {
    std::string name, help;
    ReadType type;
    std::vector<std::string> labels;
    FamilyReader read;               ///< gauges and counters
    HistogramReader read_histogram;  ///< histograms (read unset)
    std::vector<double> bounds;      ///< histograms: the buckets' upper bounds
  };
  void add_read_family(ReadFamily f);
  std::vector<ReadFamily> read_families_;
  std::unique_ptr<LabelValues> topic_labels_;
  std::unique_ptr<LabelValues> client_id_labels_;
  const uint64_t id_;  ///< distinguishes instances for the thread_local shard cache
};

}  // namespace kproxy::metrics
