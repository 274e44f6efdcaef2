#include "proxy/metrics/proxy_metrics.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <span>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "codec/generated/api_keys.h"
#include "codec/generated/error_code.h"
#include "proxy/metrics/label_values.h"

namespace kproxy::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

std::atomic<uint64_t> next_instance_id{1};

struct ShardCache {
  uint64_t owner = 0;
  MetricsShard* shard = nullptr;
};
thread_local ShardCache tls_shard;

uint64_t load(const Counter& c) { return c.load(std::memory_order_relaxed); }

std::string api_label(size_t slot) {
  if (slot == kApiSlots - 1) return "other";
  const char* name = codec::api_name(static_cast<int16_t>(slot));
  return name ? name : "unknown_" + std::to_string(slot);
}

std::string version_label(size_t slot) { return slot == kVersionSlots - 1 ? "other" : std::to_string(slot); }

std::string error_label(size_t slot) {
  if (slot == kErrorSlots - 1) return "OTHER";
  int16_t code = static_cast<int16_t>(static_cast<int>(slot) - 1);
  const char* name = codec::error_name(code);
  return name ? name : "UNKNOWN_" + std::to_string(code);
}

MetricFamily family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

MetricType metric_type(FamilyType type) {
  switch (type) {
    case FamilyType::kCounter: return MetricType::Counter;
    case FamilyType::kGauge: return MetricType::Gauge;
    case FamilyType::kHistogram: return MetricType::Histogram;
  }
  return MetricType::Untyped;
}

/// The family of a FAMILY row (metric_families.h), without samples.
MetricFamily family(FamilyId id) {
  const FamilySpec& spec = family_spec(id);
  return family(std::string(spec.name), std::string(spec.help), metric_type(spec.type));
}

/// The labels of a sample of `id`: its row's label names with `values`, in the row's order.
std::vector<ClientMetric::Label> labels_of(FamilyId id, std::initializer_list<std::string> values) {
  const FamilySpec& spec = family_spec(id);
  assert(values.size() == spec.label_count);
  std::vector<ClientMetric::Label> labels;
  labels.reserve(spec.label_count);
  auto value = values.begin();
  for (std::string_view name : spec.label_names()) {
    if (value == values.end()) break;
    labels.push_back({std::string(name), *value++});
  }
  return labels;
}

ClientMetric sample(std::vector<ClientMetric::Label> labels, double value, MetricType type) {
  ClientMetric m;
  m.label = std::move(labels);
  if (type == MetricType::Counter) m.counter.value = value;
  else m.gauge.value = value;
  return m;
}

/// A counter or gauge sample of `id` with label `values` (in its row's order).
ClientMetric sample(FamilyId id, std::initializer_list<std::string> values, double value) {
  return sample(labels_of(id, values), value, metric_type(family_spec(id).type));
}

/// A histogram sample from per-bucket (not cumulative) counts, one per bound, then any more as
/// the +Inf overflow; the count is their total.
ClientMetric histogram_sample(std::vector<ClientMetric::Label> labels, std::span<const uint64_t> per_bucket, std::span<const double> bounds,
                              double sum_seconds) {
  ClientMetric m;
  m.label = std::move(labels);
  uint64_t cumulative = 0;
  for (size_t b = 0; b < bounds.size(); ++b) {
    cumulative += b < per_bucket.size() ? per_bucket[b] : 0;
    m.histogram.bucket.push_back({cumulative, bounds[b]});
  }
  for (size_t b = bounds.size(); b < per_bucket.size(); ++b) cumulative += per_bucket[b];
  m.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = sum_seconds;
  return m;
}

}  // namespace

const char* undecoded_reason_name(UndecodedReason reason) {
  switch (reason) {
    case UndecodedReason::kUnknownApi: return "unknown_api";
    case UndecodedReason::kUnknownVersion: return "unknown_version";
    case UndecodedReason::kNotNeeded: return "not_needed";
    case UndecodedReason::kSaslRawToken: return "sasl_raw_token";
    default: return "other";
  }
}

const char* decode_error_reason_name(DecodeErrorReason reason) {
  switch (reason) {
    case DecodeErrorReason::kHeader: return "header";
    case DecodeErrorReason::kBody: return "body";
    case DecodeErrorReason::kFraming: return "framing";
    default: return "other";
  }
}

const char* proxy_event_name(ProxyEvent event) {
  auto i = static_cast<size_t>(event);
  // Every event is a string literal of the table, so its view ends in a NUL.
  return i < std::size(kProxyEvents) ? kProxyEvents[i].event.data() : "other";
}

std::string proxy_event_family_name(ProxyEvent event) {
  return std::string(kProxyEventPrefix) + proxy_event_name(event) + std::string(kCounterSuffix);
}

namespace {
// kLatencyBuckets in whole nanoseconds (each bound is a whole number of them): the bucket of a
// latency is found with integer compares, per response.
constexpr std::array<int64_t, kLatencyBuckets.size()> bucket_bounds_ns() {
  std::array<int64_t, kLatencyBuckets.size()> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(kLatencyBuckets[i] * 1e9 + 0.5);
  return out;
}
constexpr auto kBucketBoundsNs = bucket_bounds_ns();
constexpr std::array<int64_t, kResidenceBuckets.size()> residence_bounds_ns() {
  std::array<int64_t, kResidenceBuckets.size()> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(kResidenceBuckets[i] * 1e9 + 0.5);
  return out;
}
constexpr auto kResidenceBoundsNs = residence_bounds_ns();
}  // namespace

size_t residence_bucket(std::chrono::nanoseconds residence) {
  int64_t ns = residence.count();
  size_t i = 0;
  while (i < kResidenceBoundsNs.size() && kResidenceBoundsNs[i] < ns) ++i;
  return i;
}

void observe_residence(MetricsShard& shard, Direction direction, int16_t api, std::chrono::nanoseconds residence, uint64_t frames) {
  auto d = static_cast<size_t>(direction);
  size_t a = api_slot(api);
  add(shard.residence_buckets[d][a][residence_bucket(residence)], frames);
  add(shard.residence_sum_ns[d][a], frames * static_cast<uint64_t>(std::max<int64_t>(0, residence.count())));
}

size_t latency_bucket(std::chrono::nanoseconds latency) {
  // The first bucket whose bound is >= the latency (Prometheus' `le`); most are in the first few.
  int64_t ns = latency.count();
  size_t i = 0;
  while (i < kBucketBoundsNs.size() && kBucketBoundsNs[i] < ns) ++i;
  return i;
}

ProxyMetrics::ProxyMetrics(MetricsOptions options) : options_(options), id_(next_instance_id.fetch_add(1)) {
  listener_names_ = {"default"};
}

ProxyMetrics::~ProxyMetrics() = default;

void ProxyMetrics::set_listener_names(std::vector<std::string> names) {
  std::lock_guard lock(mutex_);
  if (names.empty()) names = {"default"};
  if (names.size() > kMaxListeners) names.resize(kMaxListeners);
  // Shards created before keep their size; they count extra listeners in their last slot.
  listener_names_ = std::move(names);
}

int ProxyMetrics::stage_id(std::string_view name) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < stage_names_.size(); ++i) {
    if (stage_names_[i] == name) return static_cast<int>(i);
  }
  if (stage_names_.size() + 1 >= kMaxStages) {
    if (stage_names_.size() + 1 == kMaxStages) stage_names_.emplace_back("other");
    return kMaxStages - 1;
  }
  stage_names_.emplace_back(name);
  return static_cast<int>(stage_names_.size() - 1);
}

MetricsShard& ProxyMetrics::shard() {
  ShardCache& cache = tls_shard;
  if (cache.owner == id_) return *cache.shard;
  std::lock_guard lock(mutex_);
  shards_.push_back(std::make_unique<MetricsShard>(std::max<size_t>(1, listener_names_.size())));
  cache.owner = id_;
  cache.shard = shards_.back().get();
  return *cache.shard;
}

void ProxyMetrics::request(size_t listener, int16_t api, int16_t version, size_t bytes) {
  MetricsShard& s = shard();
  size_t a = api_slot(api);
  add(s.listeners[std::min(listener, s.listener_count - 1)].requests[a][version_slot(version)]);
  add(s.request_bytes[a], bytes);
}

void ProxyMetrics::response(size_t listener, int16_t api, int16_t version, size_t bytes, std::chrono::nanoseconds latency,
                            bool observe_latency) {
  MetricsShard& s = shard();
  size_t a = api_slot(api);
  add(s.listeners[std::min(listener, s.listener_count - 1)].responses[a][version_slot(version)]);
  add(s.response_bytes[a], bytes);
  if (!observe_latency) return;
  add(s.latency_buckets[a][latency_bucket(latency)]);
  add(s.latency_sum_ns[a], static_cast<uint64_t>(std::max<int64_t>(0, latency.count())));
}

void ProxyMetrics::response_error(int16_t api, int16_t error_code) {
  if (error_code == 0) return;
  add(shard().errors[api_slot(api)][error_slot(error_code)]);
}

void ProxyMetrics::undecoded(int16_t api, UndecodedReason reason) { add(shard().undecoded[api_slot(api)][static_cast<size_t>(reason)]); }

void ProxyMetrics::decode_error(int16_t api, Direction direction, DecodeErrorReason reason) {
  add(shard().decode_errors[api_slot(api)][static_cast<size_t>(direction)][static_cast<size_t>(reason)]);
}

void ProxyMetrics::rewritten(int16_t api, int stage) {
  if (stage < 0 || stage >= kMaxStages) stage = kMaxStages - 1;
  add(shard().rewritten[api_slot(api)][static_cast<size_t>(stage)]);
}

void ProxyMetrics::inflight(int64_t delta) { add(shard().inflight, delta); }

void ProxyMetrics::connection_opened(size_t listener, Side side) {
  MetricsShard& s = shard();
  auto& l = s.listeners[std::min(listener, s.listener_count - 1)];
  add(l.connections[static_cast<size_t>(side)], 1);
  add(l.opened[static_cast<size_t>(side)]);
}

void ProxyMetrics::connection_closed(size_t listener, Side side) {
  MetricsShard& s = shard();
  add(s.listeners[std::min(listener, s.listener_count - 1)].connections[static_cast<size_t>(side)], -1);
}

void ProxyMetrics::connection_close_reason(size_t listener, net::CloseCategory reason) {
  std::lock_guard lock(mutex_);
  std::string name = listener < listener_names_.size() ? listener_names_[listener] : "other";
  ++close_reasons_[{name, std::string(net::close_label(reason))}];
}

void ProxyMetrics::fault_injected(std::string_view rule, int16_t api, std::string_view action) {
  std::lock_guard lock(mutex_);
  std::string r(rule);
  std::string a = api_label(api_slot(api));
  std::string act(action);
  auto key = std::make_tuple(r, a, act);
  if (!faults_.count(key) && faults_.size() >= options_.max_fault_rules) key = std::make_tuple(std::string("other"), a, act);
  ++faults_[key];
}

namespace {
std::string client_key(std::string_view name, std::string_view version) { return std::string(name) + '\0' + std::string(version); }
}  // namespace

ProxyMetrics::ClientSeries ProxyMetrics::client_seen(std::string_view software_name, std::string_view software_version) {
  std::lock_guard lock(mutex_);
  std::string key = client_key(software_name, software_version);
  if (!clients_.count(key) && clients_.size() >= options_.max_client_software) key = client_key("other", "other");
  auto it = clients_.try_emplace(std::move(key), 0).first;
  ++it->second;
  return &it->first;
}

void ProxyMetrics::client_gone(ClientSeries series) {
  if (series == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = clients_.find(*series);
  if (it != clients_.end() && it->second > 0) --it->second;
}

bool ProxyMetrics::is_series_of(ClientSeries series, std::string_view software_name, std::string_view software_version) {
  return series != nullptr && series->size() == software_name.size() + 1 + software_version.size() &&
         std::string_view(*series).substr(0, software_name.size()) == software_name && (*series)[software_name.size()] == '\0' &&
         std::string_view(*series).substr(software_name.size() + 1) == software_version;
}

void ProxyMetrics::enable_traffic_labels(bool topics, bool client_ids, size_t max_values) {
  std::lock_guard lock(mutex_);
  // LabelValues' series carry labels {api, <its label>}: the rows' second label is its own.
  static_assert(family_spec(FamilyId::kTopicRequests).label_names().size() == 2 &&
                family_spec(FamilyId::kTopicRequests).labels[0] == "api");
  static_assert(family_spec(FamilyId::kClientRequests).label_names().size() == 2 &&
                family_spec(FamilyId::kClientRequests).labels[0] == "api");
  auto make = [max_values](FamilyId id) {
    const FamilySpec& spec = family_spec(id);
    return std::make_unique<LabelValues>(std::string(spec.name), std::string(spec.help), std::string(spec.labels[1]), max_values);
  };
  topic_labels_ = topics ? make(FamilyId::kTopicRequests) : nullptr;
  client_id_labels_ = client_ids ? make(FamilyId::kClientRequests) : nullptr;
}

LabelledCounter& ProxyMetrics::labelled_counter(const std::string& name, const std::string& help, const std::string& label,
                                                std::vector<std::string> values) {
  std::lock_guard lock(mutex_);
  for (auto& c : counters_) {
    if (c->name() == name) return *c;
  }
  counters_.push_back(std::make_unique<LabelledCounter>(name, help, label, std::move(values)));
  return *counters_.back();
}

void ProxyMetrics::export_counter(const LabelledCounter& counter) {
  std::lock_guard lock(mutex_);
  std::erase_if(exported_counters_, [&](const LabelledCounter* c) { return c->name() == counter.name(); });
  exported_counters_.push_back(&counter);
}

void ProxyMetrics::add_gauge(const std::string& name, const std::string& help, const std::string& label, GaugeReader read) {
  std::vector<std::string> labels;
  if (!label.empty()) labels.push_back(label);
  add_family_reader(name, help, ReadType::kGauge, std::move(labels), [read = std::move(read), labelled = !label.empty()] {
    std::vector<Reading> out;
    for (auto& [value, reading] : read()) out.push_back({labelled ? std::vector<std::string>{value} : std::vector<std::string>{}, reading});
    return out;
  });
}

void ProxyMetrics::add_family_reader(const std::string& name, const std::string& help, ReadType type, std::vector<std::string> labels,
                                     FamilyReader read) {
  add_read_family(ReadFamily{name, help, type, std::move(labels), std::move(read), {}, {}});
}

void ProxyMetrics::add_histogram_reader(const std::string& name, const std::string& help, std::vector<std::string> labels,
                                        std::vector<double> bounds, HistogramReader read) {
  add_read_family(ReadFamily{name, help, ReadType::kCounter, std::move(labels), {}, std::move(read), std::move(bounds)});
}

void ProxyMetrics::add_read_family(ReadFamily f) {
  std::lock_guard lock(mutex_);
  for (auto& g : read_families_) {
    if (g.name == f.name) {
      g = std::move(f);
      return;
    }
  }
  read_families_.push_back(std::move(f));
}

std::vector<MetricFamily> ProxyMetrics::collect() const {
  std::lock_guard lock(mutex_);
  std::vector<MetricFamily> out;
  const size_t listeners = listener_names_.size();

  auto requests = family(FamilyId::kRequests);
  auto responses = family(FamilyId::kResponses);
  auto connections = family(FamilyId::kConnections);
  auto opened = family(FamilyId::kConnectionsOpened);
  for (size_t l = 0; l < listeners; ++l) {
    for (size_t a = 0; a < kApiSlots; ++a) {
      for (size_t v = 0; v < kVersionSlots; ++v) {
        uint64_t req = 0, resp = 0;
        for (const auto& s : shards_) {
          if (l >= s->listener_count) continue;
          req += load(s->listeners[l].requests[a][v]);
          resp += load(s->listeners[l].responses[a][v]);
        }
        if (!req && !resp) continue;
        std::string api = api_label(a), version = version_label(v);
        if (req) requests.metric.push_back(sample(FamilyId::kRequests, {listener_names_[l], api, version}, static_cast<double>(req)));
        if (resp) responses.metric.push_back(sample(FamilyId::kResponses, {listener_names_[l], api, version}, static_cast<double>(resp)));
      }
    }
    for (size_t side = 0; side < 2; ++side) {
      int64_t open = 0;
      uint64_t total = 0;
      for (const auto& s : shards_) {
        if (l >= s->listener_count) continue;
        open += s->listeners[l].connections[side].load(std::memory_order_relaxed);
        total += load(s->listeners[l].opened[side]);
      }
      std::string side_label = side == 0 ? "client" : "upstream";
      connections.metric.push_back(sample(FamilyId::kConnections, {listener_names_[l], side_label}, static_cast<double>(open)));
      opened.metric.push_back(sample(FamilyId::kConnectionsOpened, {listener_names_[l], side_label}, static_cast<double>(total)));
    }
  }
  out.push_back(std::move(requests));
  out.push_back(std::move(responses));
  out.push_back(std::move(connections));
  out.push_back(std::move(opened));

  auto closed = family(FamilyId::kConnectionsClosed);
  for (const auto& [key, n] : close_reasons_)
    closed.metric.push_back(sample(FamilyId::kConnectionsClosed, {key.first, key.second}, static_cast<double>(n)));
  out.push_back(std::move(closed));

  auto req_bytes = family(FamilyId::kRequestBytes);
  auto resp_bytes = family(FamilyId::kResponseBytes);
  auto errors = family(FamilyId::kResponseErrors);
  auto duration = family(FamilyId::kRequestDuration);
  auto residence = family(FamilyId::kProxyResidence);
  auto undecoded = family(FamilyId::kFramesUndecoded);
  auto decode_errors = family(FamilyId::kDecodeErrors);
  auto rewritten = family(FamilyId::kFramesRewritten);
  for (size_t a = 0; a < kApiSlots; ++a) {
    uint64_t rq = 0, rs = 0;
    for (const auto& s : shards_) {
      rq += load(s->request_bytes[a]);
      rs += load(s->response_bytes[a]);
    }
    std::string api = api_label(a);
    if (rq) req_bytes.metric.push_back(sample(FamilyId::kRequestBytes, {api}, static_cast<double>(rq)));
    if (rs) resp_bytes.metric.push_back(sample(FamilyId::kResponseBytes, {api}, static_cast<double>(rs)));
    for (size_t e = 0; e < kErrorSlots; ++e) {
      uint64_t n = 0;
      for (const auto& s : shards_) n += load(s->errors[a][e]);
      if (n) errors.metric.push_back(sample(FamilyId::kResponseErrors, {api, error_label(e)}, static_cast<double>(n)));
    }
    std::array<uint64_t, kLatencyBuckets.size() + 1> buckets{};
    uint64_t sum_ns = 0;
    for (const auto& s : shards_) {
      for (size_t b = 0; b < buckets.size(); ++b) buckets[b] += load(s->latency_buckets[a][b]);
      sum_ns += load(s->latency_sum_ns[a]);
    }
    uint64_t count = 0;
    for (uint64_t b : buckets) count += b;
    if (count) {
      duration.metric.push_back(
          histogram_sample(labels_of(FamilyId::kRequestDuration, {api}), buckets, kLatencyBuckets, static_cast<double>(sum_ns) / 1e9));
    }
    for (size_t d = 0; d < 2; ++d) {
      std::array<uint64_t, kResidenceBuckets.size() + 1> rb{};
      uint64_t rsum = 0;
      for (const auto& s : shards_) {
        for (size_t b = 0; b < rb.size(); ++b) rb[b] += load(s->residence_buckets[d][a][b]);
        rsum += load(s->residence_sum_ns[d][a]);
      }
      uint64_t rcount = 0;
      for (uint64_t b : rb) rcount += b;
      if (!rcount) continue;
      residence.metric.push_back(histogram_sample(labels_of(FamilyId::kProxyResidence, {api, d == 0 ? "request" : "response"}), rb,
                                                  kResidenceBuckets, static_cast<double>(rsum) / 1e9));
    }
    for (size_t r = 0; r < static_cast<size_t>(UndecodedReason::kCount); ++r) {
      uint64_t n = 0;
      for (const auto& s : shards_) n += load(s->undecoded[a][r]);
      if (n) {
        undecoded.metric.push_back(
            sample(FamilyId::kFramesUndecoded, {api, undecoded_reason_name(static_cast<UndecodedReason>(r))}, static_cast<double>(n)));
      }
    }
    for (size_t d = 0; d < 2; ++d) {
      for (size_t r = 0; r < static_cast<size_t>(DecodeErrorReason::kCount); ++r) {
        uint64_t n = 0;
        for (const auto& s : shards_) n += load(s->decode_errors[a][d][r]);
        if (n) {
          decode_errors.metric.push_back(sample(
              FamilyId::kDecodeErrors, {api, d == 0 ? "request" : "response", decode_error_reason_name(static_cast<DecodeErrorReason>(r))},
              static_cast<double>(n)));
        }
      }
    }
    for (size_t st = 0; st < kMaxStages; ++st) {
      uint64_t n = 0;
      for (const auto& s : shards_) n += load(s->rewritten[a][st]);
      if (n) {
        std::string stage = st < stage_names_.size() ? stage_names_[st] : "other";
        rewritten.metric.push_back(sample(FamilyId::kFramesRewritten, {api, stage}, static_cast<double>(n)));
      }
    }
  }
  out.push_back(std::move(req_bytes));
  out.push_back(std::move(resp_bytes));
  out.push_back(std::move(errors));
  out.push_back(std::move(duration));
  out.push_back(std::move(residence));
  out.push_back(std::move(undecoded));
  out.push_back(std::move(decode_errors));
  out.push_back(std::move(rewritten));

  for (size_t e = 0; e < std::size(kProxyEvents); ++e) {
    uint64_t n = 0;
    for (const auto& sh : shards_) n += sh->events[e].load(std::memory_order_relaxed);
    auto f = family(proxy_event_family_name(static_cast<ProxyEvent>(e)), std::string(kProxyEvents[e].help), MetricType::Counter);
    f.metric.push_back(sample({}, static_cast<double>(n), MetricType::Counter));
    out.push_back(std::move(f));
  }

  auto inflight = family(FamilyId::kInflightRequests);
  int64_t in = 0;
  for (const auto& s : shards_) in += s->inflight.load(std::memory_order_relaxed);
  inflight.metric.push_back(sample(FamilyId::kInflightRequests, {}, static_cast<double>(std::max<int64_t>(0, in))));
  out.push_back(std::move(inflight));

  auto faults = family(FamilyId::kFaultsInjected);
  for (const auto& [key, n] : faults_) {
    faults.metric.push_back(
        sample(FamilyId::kFaultsInjected, {std::get<0>(key), std::get<1>(key), std::get<2>(key)}, static_cast<double>(n)));
  }
  out.push_back(std::move(faults));

  auto clients = family(FamilyId::kClients);
  for (const auto& [key, n] : clients_) {
    size_t nul = key.find('\0');
    clients.metric.push_back(sample(FamilyId::kClients, {key.substr(0, nul), key.substr(nul + 1)}, static_cast<double>(n)));
  }
  out.push_back(std::move(clients));

  if (topic_labels_ || client_id_labels_) {
    auto folded = family(FamilyId::kLabelValuesFolded);
    for (const LabelValues* l : {topic_labels_.get(), client_id_labels_.get()}) {
      if (!l) continue;
      out.push_back(l->collect());
      folded.metric.push_back(sample(FamilyId::kLabelValuesFolded, {l->label()}, static_cast<double>(l->folded())));
    }
    out.push_back(std::move(folded));
  }
  for (const auto& c : counters_) out.push_back(c->family());
  for (const auto* c : exported_counters_) out.push_back(c->family());
  for (const auto& g : read_families_) {
    if (g.read_histogram) {
      auto f = family(g.name, g.help, MetricType::Histogram);
      for (auto& reading : g.read_histogram()) {
        std::vector<ClientMetric::Label> labels;
        for (size_t i = 0; i < g.labels.size() && i < reading.labels.size(); ++i) labels.push_back({g.labels[i], reading.labels[i]});
        f.metric.push_back(histogram_sample(std::move(labels), reading.buckets, g.bounds, reading.sum));
      }
      out.push_back(std::move(f));
      continue;
    }
    MetricType type = g.type == ReadType::kCounter ? MetricType::Counter : MetricType::Gauge;
    auto f = family(g.name, g.help, type);
    for (auto& [values, reading] : g.read()) {
      std::vector<ClientMetric::Label> labels;
      for (size_t i = 0; i < g.labels.size() && i < values.size(); ++i) labels.push_back({g.labels[i], values[i]});
      f.metric.push_back(sample(std::move(labels), reading, type));
    }
    out.push_back(std::move(f));
  }
  // Empty families are legal but noisy; drop them.
  std::erase_if(out, [](const MetricFamily& f) { return f.metric.empty(); });
  return out;
}

std::string ProxyMetrics::render() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, collect());
  return out.str();
}

uint64_t ProxyMetrics::requests_total(int16_t api) const {
  std::lock_guard lock(mutex_);
  uint64_t n = 0;
  for (const auto& s : shards_)
    for (size_t l = 0; l < s->listener_count; ++l)
      for (const auto& c : s->listeners[l].requests[api_slot(api)]) n += load(c);
  return n;
}

uint64_t ProxyMetrics::responses_total(int16_t api) const {
  std::lock_guard lock(mutex_);
  uint64_t n = 0;
  for (const auto& s : shards_)
    for (size_t l = 0; l < s->listener_count; ++l)
      for (const auto& c : s->listeners[l].responses[api_slot(api)]) n += load(c);
  return n;
}

uint64_t ProxyMetrics::errors_total(int16_t api, int16_t error_code) const {
  std::lock_guard lock(mutex_);
  uint64_t n = 0;
  for (const auto& s : shards_) n += load(s->errors[api_slot(api)][error_slot(error_code)]);
  return n;
}

uint64_t ProxyMetrics::latency_count(int16_t api) const {
  std::lock_guard lock(mutex_);
  uint64_t n = 0;
  for (const auto& s : shards_)
    for (const auto& c : s->latency_buckets[api_slot(api)]) n += load(c);
  return n;
}

uint64_t ProxyMetrics::residence_count(int16_t api, Direction direction) const {
  std::lock_guard lock(mutex_);
  uint64_t n = 0;
  for (const auto& s : shards_)
    for (const auto& c : s->residence_buckets[static_cast<size_t>(direction)][api_slot(api)]) n += load(c);
  return n;
}

uint64_t ProxyMetrics::fault_injections(std::string_view rule) const {
  std::lock_guard lock(mutex_);
  uint64_t n = 0;
  for (const auto& [key, count] : faults_)
    if (std::get<0>(key) == rule) n += count;
  return n;
}

uint64_t ProxyMetrics::total(ProxyEvent event) const {
  std::lock_guard lock(mutex_);
  uint64_t n = 0;
  for (const auto& s : shards_) n += s->events[static_cast<size_t>(event)].load(std::memory_order_relaxed);
  return n;
}

}  // namespace kproxy::metrics
