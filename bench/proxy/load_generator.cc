// kproxy-load: a Kafka Produce load generator for the proxy benchmark (bench/proxy/run).
//
//   kproxy-load --target HOST:PORT --mode saturate|rate|idle [options]
//
//   saturate  N connections each keep --depth Produce requests in flight for --duration seconds
//             (after --warmup); reports requests/s and MB/s of record batches answered. With
//             --requests N it stops after N requests in all (a fixed amount of work, for
//             instruction counts of the proxy under callgrind: bench/proxy/README.md).
//   rate      --rate requests/s in total, sent on a fixed schedule (a timerfd tick per request,
//             spread round-robin over the connections, whatever the answers do: open loop);
//             reports p50/p99/p99.9/max of send → response latency.
//   idle      opens --connections connections (each does one ApiVersions round trip so the whole
//             path through a proxy exists), prints {"event":"ready",...} on stdout, then holds
//             them for --hold seconds or until SIGTERM/SIGINT.
//   soak      like saturate, but each connection pipelines a seeded random mix of APIs (--mix,
//             default Produce, Metadata, FindCoordinator, InitProducerId, ApiVersions) and expects
//             faults: error codes in answers are counted, not failures, and a connection the far
//             side closes (a `close` fault rule) is opened again. Every answer is still decoded
//             and matched to its request; mismatches and undecodable answers are failures.
//
// --transactional (saturate, rate): each connection is a transactional producer (transaction
// version 1, as librdkafka): after ApiVersions it calls InitProducerId for its own
// transactional.id ("kproxy-load-txn-<connection>"), then loops AddPartitionsToTxn (its
// partition), --txn-produces Produce requests whose record batch is transactional (the producer
// id and epoch it was given, the transactional attribute, a sequence), and EndTxn (commit). Like
// a real client it begins the next transaction only when the EndTxn is answered. This gives a
// proxy's transaction tracker (docs/transactions.md) its real work; the figures still count
// the Produce requests and their record-batch bytes only.
//
// Every response's correlation id is checked against the oldest request in flight on its
// connection (mismatches are counted and must be zero); every ProduceResponse is decoded and
// its error codes checked. A run is bounded in time (--max-seconds as a last resort) and ends by
// itself. The result is one JSON line on stdout; a readable summary goes to stderr. Exit status 0
// only when nothing went wrong (no mismatch, no error, no lost response, no failed connection).
//
// Each Produce request is the same pre-encoded frame (one per partition) whose first 12 bytes
// (size, api key, version, correlation id) are copied per request; the rest is shared by every
// write (uv_write with two buffers per request), so 1 MiB requests cost no copy here.
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <uv.h>
#include <nlohmann/json.hpp>

#include "codec/api_versions.h"
#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/request_header.h"
#include "codec/response_header.h"

namespace {

using namespace kproxy::codec;

constexpr size_t kFixedHeaderBytes = 12;  // size prefix, api key, api version, correlation id
constexpr size_t kMaxResponseFrame = 64u << 20;
constexpr int kMaxBatch = 256;  // requests per uv_write
constexpr const char* kClientId = "kproxy-load";

enum class Mode { kSaturate, kRate, kIdle, kSoak };

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  Mode mode = Mode::kSaturate;
  int connections = 8;
  int depth = 8;
  size_t size = 1024;
  double rate = 10000;
  double duration = 5;
  double warmup = 1;
  double hold = 60;
  double max_seconds = 0;  // 0: derived from the others
  int acks = 1;
  int16_t produce_version = 12;
  std::string topic = "bench";
  int partitions = 8;
  bool metadata = false;
  std::string expect_broker;
  int connect_concurrency = 256;
  std::vector<std::string> watch_pids;  // "PID" or "PID/TID" (one thread)
  size_t max_samples = 4'000'000;
  std::string source;     // --source: local address the connections are made from ("" = the kernel's pick)
  uint64_t requests = 0;  // saturate: stop after this many Produce requests (0: --duration decides)
  std::string mix = "produce:60,metadata:15,find_coordinator:10,init_producer_id:10,api_versions:5";  // soak
  uint64_t seed = 1;           // soak: the API mix of connection i comes from seed + i
  bool transactional = false;  // --transactional
  int txn_produces = 20;       // Produce requests per transaction
};

// ---- RecordBatch v2 --------------------------------------------------------------------------

uint32_t crc32c(const uint8_t* p, size_t n) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/// A valid RecordBatch (magic 2, one record, no key, no compression) of exactly `size` bytes
/// when size >= 69 (smaller sizes get the smallest batch). With a producer id: an idempotent
/// batch of that producer (sequence 0), transactional when `transactional`.
std::vector<uint8_t> record_batch(size_t size, int64_t producer_id = -1, int16_t producer_epoch = -1, bool transactional = false) {
  constexpr size_t kBatchHeader = 61;
  size_t value = 0;
  for (int i = 0; i < 8; ++i) {  // fixed point: the varints' widths depend on the value length
    size_t rec = 5 + varint_size(static_cast<int32_t>(value)) + value;
    size_t total = kBatchHeader + varint_size(static_cast<int32_t>(rec)) + rec;
    if (total == size) break;
    if (total < size) value += size - total;
    else value -= std::min(value, total - size);
  }
  std::vector<uint8_t> out;
  Writer w(out);
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  w.int64(0);   // baseOffset
  w.int32(0);   // batchLength, patched
  w.int32(-1);  // partitionLeaderEpoch
  w.int8(2);    // magic
  w.uint32(0);  // crc, patched
  size_t crc_from = out.size();
  w.int16(transactional ? 0x10 : 0);   // attributes: bit 4 = transactional
  w.int32(0);                          // lastOffsetDelta
  w.int64(now_ms);                     // baseTimestamp
  w.int64(now_ms);                     // maxTimestamp
  w.int64(producer_id);                // producerId
  w.int16(producer_epoch);             // producerEpoch
  w.int32(producer_id >= 0 ? 0 : -1);  // baseSequence
  w.int32(1);                          // records
  size_t rec = 5 + varint_size(static_cast<int32_t>(value)) + value;
  w.varint(static_cast<int32_t>(rec));
  w.int8(0);     // attributes
  w.varint(0);   // timestampDelta
  w.varint(0);   // offsetDelta
  w.varint(-1);  // key: null
  w.varint(static_cast<int32_t>(value));
  for (size_t i = 0; i < value; ++i) out.push_back(static_cast<uint8_t>('a' + (i * 7 + i / 13) % 26));
  w.varint(0);  // headers
  w.patch_int32(8, static_cast<int32_t>(out.size() - 12));
  w.patch_int32(17, static_cast<int32_t>(crc32c(out.data() + crc_from, out.size() - crc_from)));
  return out;
}

// ---- CPU of watched processes ----------------------------------------------------------------

/// CPU time in user space and in the kernel, in seconds.
struct CpuTimes {
  double user = -1;
  double sys = -1;
  double total() const { return user < 0 ? -1 : user + sys; }
};

/// utime and stime of a process ("PID") or of one of its threads ("PID/TID":
/// /proc/PID/task/TID/stat, which is the thread alone also when TID == PID); -1 if unreadable.
CpuTimes cpu_times(const std::string& which) {
  auto slash = which.find('/');
  std::string path = slash == std::string::npos ? "/proc/" + which + "/stat"
                                                : "/proc/" + which.substr(0, slash) + "/task/" + which.substr(slash + 1) + "/stat";
  std::ifstream f(path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto close = s.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream in(s.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  const auto tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return {static_cast<double>(utime) / tick, static_cast<double>(stime) / tick};
}

double cpu_seconds(const std::string& which) { return cpu_times(which).total(); }

// ---- connections -----------------------------------------------------------------------------

enum class Kind : uint8_t { kApiVersions, kMetadata, kProduce, kFindCoordinator, kInitProducerId, kAddPartitionsToTxn, kEndTxn };
constexpr size_t kKinds = 7;
constexpr std::array<const char*, kKinds> kKindNames = {
    "api_versions", "metadata", "produce", "find_coordinator", "init_producer_id", "add_partitions_to_txn", "end_txn"};

struct Pending {
  int32_t correlation_id;
  Kind kind;
  uint64_t sent_ns;
};

class Load;

struct Conn {
  uv_tcp_t tcp;
  uv_connect_t connect_req;
  Load* load = nullptr;
  int index = 0;
  FrameReader responses{kMaxResponseFrame};
  std::vector<Pending> pending;  // FIFO: [head, end)
  size_t head = 0;
  int32_t next_correlation_id = 1;
  bool ready = false, closing = false, connected = false;
  bool reopened = false;  // soak: a replacement for a connection the far side closed
  std::mt19937_64 rng;    // soak: the API mix
  // --transactional: this connection's producer, its Produce frame, where it is in a transaction
  std::string transactional_id;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  std::vector<uint8_t> txn_frame;
  int txn_pos = 0;          // Produce requests sent in the current transaction
  bool txn_ending = false;  // EndTxn sent, not yet answered: the next transaction waits

  size_t inflight() const { return pending.size() - head; }
  void push(const Pending& p) { pending.push_back(p); }
  Pending pop() {
    Pending p = pending[head++];
    if (head == pending.size()) {
      pending.clear();
      head = 0;
    } else if (head > 1024 && head * 2 > pending.size()) {
      pending.erase(pending.begin(), pending.begin() + static_cast<ptrdiff_t>(head));
      head = 0;
    }
    return p;
  }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp); }
};

struct WriteBatch {
  uv_write_t req;
  std::vector<uv_buf_t> bufs;
  std::vector<std::array<uint8_t, kFixedHeaderBytes>> headers;
  std::vector<uint8_t> owned;  // for one-off requests (ApiVersions, Metadata)
};

class Load {
 public:
  explicit Load(const Options& o) : o_(o) {}

  int run();

 private:
  // setup
  void build_templates();
  void open_next_connections();
  void open_connection(int index);
  static void after_connect(uv_connect_t* req, int status);
  void send_owned(Conn* c, Kind kind, int16_t api_key, int16_t version, const Message& body);
  void on_conn_ready(Conn* c);
  void after_handshake(Conn* c);
  void build_txn_frame(Conn* c);
  void send_add_partitions(Conn* c);
  void send_end_txn(Conn* c);
  void all_ready();

  // traffic
  void send_produce(Conn* c, int count);
  void send_mix(Conn* c, int count);
  bool on_soak_response(Conn* c, Kind kind, Bytes message);
  void reopen(Conn* c);
  static void after_write(uv_write_t* req, int status);
  static void on_alloc(uv_handle_t*, size_t, uv_buf_t* buf);
  static void after_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf);
  bool on_response(Conn* c, Bytes frame, uint64_t now);
  void on_rate_tick();

  // phases
  void start_window();
  void end_window();
  void finish(const char* why);
  void conn_failed(Conn* c, const std::string& what);
  void close_conn(Conn* c);
  void report();

  const Options& o_;
  uv_loop_t loop_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<std::vector<uint8_t>> templates_;  // one Produce frame per partition
  int opened_ = 0, connecting_ = 0, ready_ = 0, failed_ = 0;
  bool sending_ = false, in_window_ = false, finishing_ = false;
  uint64_t window_start_ns_ = 0, window_end_ns_ = 0, start_ns_ = 0;
  uint64_t sent_ = 0, answered_ = 0, window_answered_ = 0, window_sent_ = 0;
  uint64_t mismatches_ = 0, unexpected_ = 0, produce_errors_ = 0, decode_errors_ = 0, lost_ = 0, backlog_skips_ = 0;
  std::vector<std::string> brokers_seen_;
  // soak
  std::vector<std::pair<Kind, uint32_t>> mix_;  // cumulative weights
  uint32_t mix_total_ = 0;
  std::array<uint64_t, kKinds> kind_sent_{}, kind_answered_{}, kind_errors_{};
  uint64_t peer_closes_ = 0;
  uint64_t txn_committed_ = 0;                  // --transactional: EndTxn answered without error
  std::vector<std::unique_ptr<Conn>> retired_;  // closed connections, kept until the loop ends
  std::string first_error_;
  std::vector<uint64_t> samples_ns_;  // latencies of requests sent inside the window (rate mode)
  std::vector<CpuTimes> cpu_start_, cpu_end_;
  double self_cpu_start_ = 0, self_cpu_end_ = 0;
  // rate mode
  int timer_fd_ = -1;
  uv_poll_t tick_;
  uint64_t rate_started_ns_ = 0, rate_sent_ = 0;
  size_t rr_ = 0;
  // timers and signals
  uv_timer_t phase_timer_, deadline_timer_;
  uv_idle_t drain_check_;
  uv_signal_t sigterm_, sigint_;
  bool ready_printed_ = false;
};

/// One Produce request frame (correlation id 0) carrying `batch` to one partition.
std::vector<uint8_t> produce_frame(const Options& o, int partition, const std::vector<uint8_t>& batch,
                                   std::optional<std::string_view> transactional_id = std::nullopt) {
  ProduceRequest req;
  req.transactional_id = transactional_id;
  req.acks = static_cast<int16_t>(o.acks);
  req.timeout_ms = 30000;
  ProduceRequest::TopicProduceData t;
  t.name = o.topic;
  ProduceRequest::PartitionProduceData pd;
  pd.index = partition;
  pd.records = Bytes(batch.data(), batch.size());
  t.partition_data.push_back(pd);
  req.topic_data.push_back(t);
  RequestHeader h;
  h.api_key = ProduceRequest::kApiKey;
  h.api_version = o.produce_version;
  h.correlation_id = 0;
  h.client_id = kClientId;
  h.header_version = request_header_version(h.api_key, h.api_version);
  std::vector<uint8_t> frame;
  Writer w(frame);
  w.int32(0);
  write_request_header(w, h);
  req.write(w, o.produce_version);
  w.patch_int32(0, static_cast<int32_t>(frame.size() - kFrameSizePrefix));
  return frame;
}

void Load::build_templates() {
  std::vector<uint8_t> batch = record_batch(o_.size);
  for (int p = 0; p < o_.partitions; ++p) templates_.push_back(produce_frame(o_, p, batch));
}

void Load::build_txn_frame(Conn* c) {
  std::vector<uint8_t> batch = record_batch(o_.size, c->producer_id, c->producer_epoch, true);
  c->txn_frame = produce_frame(o_, c->index % o_.partitions, batch, c->transactional_id);
}

void Load::after_handshake(Conn* c) {
  if (!o_.transactional || c->producer_id >= 0) {
    on_conn_ready(c);
    return;
  }
  InitProducerIdRequest ip;
  ip.transactional_id = c->transactional_id;
  ip.transaction_timeout_ms = 60000;
  send_owned(c, Kind::kInitProducerId, InitProducerIdRequest::kApiKey, 4, ip);
}

void Load::send_add_partitions(Conn* c) {
  AddPartitionsToTxnRequest req;
  req.v3_and_below_transactional_id = c->transactional_id;
  req.v3_and_below_producer_id = c->producer_id;
  req.v3_and_below_producer_epoch = c->producer_epoch;
  AddPartitionsToTxnRequest::AddPartitionsToTxnTopic t;
  t.name = o_.topic;
  t.partitions = {c->index % o_.partitions};
  req.v3_and_below_topics.push_back(std::move(t));
  send_owned(c, Kind::kAddPartitionsToTxn, AddPartitionsToTxnRequest::kApiKey, 3, req);
}

void Load::send_end_txn(Conn* c) {
  EndTxnRequest req;
  req.transactional_id = c->transactional_id;
  req.producer_id = c->producer_id;
  req.producer_epoch = c->producer_epoch;
  req.committed = true;
  c->txn_ending = true;
  send_owned(c, Kind::kEndTxn, EndTxnRequest::kApiKey, 3, req);
}

void Load::open_next_connections() {
  while (opened_ < o_.connections && connecting_ < o_.connect_concurrency && !finishing_) open_connection(opened_++);
}

void Load::open_connection(int index) {
  auto& c = conns_[static_cast<size_t>(index)];
  c = std::make_unique<Conn>();
  c->load = this;
  c->index = index;
  c->rng.seed(o_.seed + static_cast<uint64_t>(index));
  if (o_.transactional) c->transactional_id = "kproxy-load-txn-" + std::to_string(index);
  uv_tcp_init(&loop_, &c->tcp);
  c->tcp.data = c.get();
  c->connect_req.data = c.get();
  if (!o_.source.empty()) {
    sockaddr_in local{};
    uv_ip4_addr(o_.source.c_str(), 0, &local);
    if (int rc = uv_tcp_bind(&c->tcp, reinterpret_cast<const sockaddr*>(&local), 0); rc != 0) {
      conn_failed(c.get(), std::string("bind ") + o_.source + ": " + uv_strerror(rc));
      return;
    }
  }
  sockaddr_in addr{};
  uv_ip4_addr(o_.host.c_str(), o_.port, &addr);
  ++connecting_;
  int rc = uv_tcp_connect(&c->connect_req, &c->tcp, reinterpret_cast<const sockaddr*>(&addr), after_connect);
  if (rc != 0) {
    --connecting_;
    conn_failed(c.get(), std::string("connect: ") + uv_strerror(rc));
  }
}

void Load::after_connect(uv_connect_t* req, int status) {
  auto* c = static_cast<Conn*>(req->data);
  Load* self = c->load;
  --self->connecting_;
  if (status < 0) {
    if (status != UV_ECANCELED) self->conn_failed(c, std::string("connect: ") + uv_strerror(status));
    self->open_next_connections();
    return;
  }
  if (c->closing) return;
  c->connected = true;
  uv_tcp_nodelay(&c->tcp, 1);
  uv_read_start(c->stream(), on_alloc, after_read);
  ApiVersionsRequest av;
  av.client_software_name = "kproxy-load";
  av.client_software_version = "0.1.0";
  self->send_owned(c, Kind::kApiVersions, ApiVersionsRequest::kApiKey, 3, av);
}

void Load::send_owned(Conn* c, Kind kind, int16_t api_key, int16_t version, const Message& body) {
  auto* b = new WriteBatch;
  RequestHeader h;
  h.api_key = api_key;
  h.api_version = version;
  h.correlation_id = c->next_correlation_id++;
  h.client_id = kClientId;
  h.header_version = request_header_version(api_key, version);
  Writer w(b->owned);
  w.int32(0);
  write_request_header(w, h);
  body.write(w, version);
  w.patch_int32(0, static_cast<int32_t>(b->owned.size() - kFrameSizePrefix));
  b->bufs.push_back(uv_buf_init(reinterpret_cast<char*>(b->owned.data()), static_cast<unsigned>(b->owned.size())));
  b->req.data = b;
  c->push({h.correlation_id, kind, uv_hrtime()});
  if (int rc = uv_write(&b->req, c->stream(), b->bufs.data(), 1, after_write); rc != 0) {
    delete b;
    conn_failed(c, std::string("write: ") + uv_strerror(rc));
  }
}

void Load::on_conn_ready(Conn* c) {
  c->ready = true;
  if (c->reopened) {  // soak: back into the traffic, not counted again
    if (sending_) send_mix(c, o_.depth);
    return;
  }
  ++ready_;
  open_next_connections();
  if (ready_ + failed_ == o_.connections) all_ready();
}

void Load::all_ready() {
  start_ns_ = uv_hrtime();
  if (o_.mode == Mode::kIdle) {
    nlohmann::json j = {{"event", "ready"}, {"ready", ready_}, {"failed", failed_}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
    ready_printed_ = true;
    std::fprintf(stderr, "kproxy-load: %d idle connections open (%d failed); holding for %.0f s\n", ready_, failed_, o_.hold);
    uv_timer_start(
        &phase_timer_, [](uv_timer_t* t) { static_cast<Load*>(t->data)->finish("hold time over"); }, static_cast<uint64_t>(o_.hold * 1000),
        0);
    return;
  }
  sending_ = true;
  if (o_.mode == Mode::kSaturate || o_.mode == Mode::kSoak) {
    for (auto& c : conns_) {
      if (!c || !c->ready || c->closing) continue;
      if (o_.mode == Mode::kSoak) send_mix(c.get(), o_.depth);
      else send_produce(c.get(), o_.depth);
    }
  } else {
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    auto interval_ns = static_cast<long>(std::max(20'000.0, 1e9 / o_.rate));  // at most 50,000 ticks/s
    itimerspec spec{};
    spec.it_interval.tv_sec = interval_ns / 1'000'000'000;
    spec.it_interval.tv_nsec = interval_ns % 1'000'000'000;
    spec.it_value = spec.it_interval;
    timerfd_settime(timer_fd_, 0, &spec, nullptr);
    uv_poll_init(&loop_, &tick_, timer_fd_);
    tick_.data = this;
    rate_started_ns_ = uv_hrtime();
    uv_poll_start(&tick_, UV_READABLE, [](uv_poll_t* p, int, int) { static_cast<Load*>(p->data)->on_rate_tick(); });
  }
  uv_timer_start(
      &phase_timer_, [](uv_timer_t* t) { static_cast<Load*>(t->data)->start_window(); }, static_cast<uint64_t>(o_.warmup * 1000), 0);
}

void Load::on_rate_tick() {
  uint64_t expirations = 0;
  if (read(timer_fd_, &expirations, sizeof(expirations)) < 0) return;
  if (!sending_) return;
  auto due = static_cast<uint64_t>(static_cast<double>(uv_hrtime() - rate_started_ns_) * o_.rate / 1e9);
  while (rate_sent_ < due) {
    Conn* c = nullptr;
    for (size_t tries = 0; tries < conns_.size(); ++tries) {
      Conn* candidate = conns_[rr_++ % conns_.size()].get();
      if (candidate && candidate->ready && !candidate->closing) {
        c = candidate;
        break;
      }
    }
    if (!c) return;
    ++rate_sent_;
    if (c->inflight() > 100'000) {  // the far side stopped answering: do not grow without bound
      ++backlog_skips_;
      continue;
    }
    send_produce(c, 1);
  }
}

void Load::send_produce(Conn* c, int count) {
  const std::vector<uint8_t>& frame = o_.transactional ? c->txn_frame : templates_[static_cast<size_t>(c->index % o_.partitions)];
  if (o_.requests > 0)
    count = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(count), o_.requests - std::min(sent_, o_.requests)));
  while (count > 0) {
    int n = std::min(count, kMaxBatch);
    if (o_.transactional) {
      if (c->txn_ending) {  // the next transaction begins when the EndTxn is answered
        if (o_.mode == Mode::kRate) backlog_skips_ += static_cast<uint64_t>(count);
        return;
      }
      if (c->txn_pos == 0) send_add_partitions(c);
      if (c->closing) return;
      n = std::min(n, o_.txn_produces - c->txn_pos);
    }
    count -= n;
    auto* b = new WriteBatch;
    b->headers.resize(static_cast<size_t>(n));
    b->bufs.reserve(static_cast<size_t>(n) * 2);
    uint64_t now = uv_hrtime();
    for (int i = 0; i < n; ++i) {
      auto& h = b->headers[static_cast<size_t>(i)];
      std::memcpy(h.data(), frame.data(), kFixedHeaderBytes);
      int32_t id = c->next_correlation_id++;
      if (c->next_correlation_id < 0) c->next_correlation_id = 1;
      auto u = static_cast<uint32_t>(id);
      h[8] = static_cast<uint8_t>(u >> 24);
      h[9] = static_cast<uint8_t>(u >> 16);
      h[10] = static_cast<uint8_t>(u >> 8);
      h[11] = static_cast<uint8_t>(u);
      b->bufs.push_back(uv_buf_init(reinterpret_cast<char*>(h.data()), kFixedHeaderBytes));
      b->bufs.push_back(uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(frame.data() + kFixedHeaderBytes)),
                                    static_cast<unsigned>(frame.size() - kFixedHeaderBytes)));
      if (o_.acks != 0) c->push({id, Kind::kProduce, now});
      ++sent_;
      if (in_window_) ++window_sent_;
    }
    b->req.data = b;
    if (int rc = uv_write(&b->req, c->stream(), b->bufs.data(), static_cast<unsigned>(b->bufs.size()), after_write); rc != 0) {
      delete b;
      conn_failed(c, std::string("write: ") + uv_strerror(rc));
      return;
    }
    if (o_.transactional && (c->txn_pos += n) >= o_.txn_produces) {
      c->txn_pos = 0;
      send_end_txn(c);
      if (c->closing) return;
    }
  }
}

void Load::after_write(uv_write_t* req, int status) {
  auto* c = static_cast<Conn*>(req->handle->data);  // before the delete: req lives inside b
  auto* b = static_cast<WriteBatch*>(req->data);
  delete b;
  if (status < 0 && status != UV_ECANCELED) c->load->conn_failed(c, std::string("write: ") + uv_strerror(status));
}

void Load::on_alloc(uv_handle_t*, size_t, uv_buf_t* buf) {
  static std::unique_ptr<char[]> shared(new char[256 << 10]);
  *buf = uv_buf_init(shared.get(), 256 << 10);
}

void Load::after_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  auto* c = static_cast<Conn*>(s->data);
  Load* self = c->load;
  if (c->closing) return;
  if (n < 0) {
    self->conn_failed(c, n == UV_EOF ? "the far side closed the connection" : std::string("read: ") + uv_strerror(static_cast<int>(n)));
    return;
  }
  if (n == 0) return;
  uint64_t now = uv_hrtime();
  bool ok = c->responses.feed(Bytes(reinterpret_cast<const uint8_t*>(buf->base), static_cast<size_t>(n)),
                              [&](Bytes frame) { return self->on_response(c, frame, now); });
  if (c->closing) return;
  if (!ok) {
    self->conn_failed(c, "bad response framing: " + c->responses.error());
    return;
  }
  if ((self->o_.mode == Mode::kSaturate || self->o_.mode == Mode::kSoak) && self->sending_ && c->ready) {
    int deficit = self->o_.depth - static_cast<int>(c->inflight());
    if (deficit > 0 && self->o_.mode == Mode::kSoak) self->send_mix(c, deficit);
    else if (deficit > 0) self->send_produce(c, deficit);
  }
}

/// Decodes a response body (after its header) into `m`; false when it does not decode.
template <class M>
bool decode_response(Bytes message, int16_t version, M& m, std::string* error) {
  ResponseHeader rh;
  if (!read_response_header(message, response_header_version(M::kApiKey, version), rh, nullptr)) {
    *error = std::string(M::kName) + ": bad response header";
    return false;
  }
  Reader r(message.subspan(rh.size));
  m.read(r, version);
  if (!r.ok()) *error = r.error();
  return r.ok();
}

bool Load::on_response(Conn* c, Bytes frame, uint64_t now) {
  Bytes message = frame.subspan(kFrameSizePrefix);
  if (c->inflight() == 0) {
    ++unexpected_;
    conn_failed(c, "a response with no request in flight");
    return false;
  }
  Pending p = c->pop();
  if (message.size() < 4 || peek_response_correlation_id(message) != p.correlation_id) {
    ++mismatches_;
    if (first_error_.empty()) {
      first_error_ = "correlation id mismatch on connection " + std::to_string(c->index) + ": expected " +
                     std::to_string(p.correlation_id) + ", got " +
                     (message.size() >= 4 ? std::to_string(peek_response_correlation_id(message)) : "none");
    }
    return true;
  }
  if (o_.mode == Mode::kSoak && c->ready) return on_soak_response(c, p.kind, message);
  switch (p.kind) {
    case Kind::kFindCoordinator:
      ++unexpected_;  // only soak sends these
      return true;
    case Kind::kInitProducerId: {
      InitProducerIdResponse m;
      std::string error;
      if (!o_.transactional || !decode_response(message, 4, m, &error) || m.error_code != 0 || m.producer_id < 0) {
        ++decode_errors_;
        conn_failed(c, o_.transactional ? "InitProducerId failed: " + (error.empty() ? "error " + std::to_string(m.error_code) : error)
                                        : std::string("an InitProducerId answer nobody asked for"));
        return false;
      }
      c->producer_id = m.producer_id;
      c->producer_epoch = m.producer_epoch;
      build_txn_frame(c);
      on_conn_ready(c);
      return true;
    }
    case Kind::kAddPartitionsToTxn:
    case Kind::kEndTxn: {
      std::string error;
      int16_t code = 0;
      bool decoded = false;
      if (p.kind == Kind::kEndTxn) {
        EndTxnResponse m;
        decoded = decode_response(message, 3, m, &error);
        code = m.error_code;
        c->txn_ending = false;
      } else {
        AddPartitionsToTxnResponse m;
        decoded = decode_response(message, 3, m, &error);
        for (const auto& t : m.results_by_topic_v3_and_below)
          for (const auto& r : t.results_by_partition)
            if (code == 0) code = r.partition_error_code;
      }
      if (!decoded) {
        ++decode_errors_;
        if (first_error_.empty()) first_error_ = std::string(kKindNames[static_cast<size_t>(p.kind)]) + ": " + error;
      } else if (code != 0) {
        ++produce_errors_;
        if (first_error_.empty())
          first_error_ = std::string(kKindNames[static_cast<size_t>(p.kind)]) + " error code " + std::to_string(code);
      } else if (p.kind == Kind::kEndTxn) {
        ++txn_committed_;
      }
      return true;
    }
    case Kind::kProduce: {
      ++answered_;
      if (in_window_) {
        if (o_.mode == Mode::kSaturate) ++window_answered_;
        // A fixed count (--requests): the window ends with the last answer.
        if (o_.requests > 0 && answered_ >= o_.requests) end_window();
      }
      if (o_.mode == Mode::kRate && p.sent_ns >= window_start_ns_ && window_start_ns_ != 0 &&
          (window_end_ns_ == 0 || p.sent_ns < window_end_ns_)) {
        ++window_answered_;
        if (samples_ns_.size() < o_.max_samples) samples_ns_.push_back(now - p.sent_ns);
      }
      ResponseHeader rh;
      int hv = response_header_version(ProduceResponse::kApiKey, o_.produce_version);
      if (!read_response_header(message, hv, rh, nullptr)) {
        ++decode_errors_;
        return true;
      }
      ProduceResponse resp;
      Reader r(message.subspan(rh.size));
      resp.read(r, o_.produce_version);
      if (!r.ok() || resp.responses.size() != 1 || resp.responses[0].partition_responses.size() != 1) {
        ++decode_errors_;
        if (first_error_.empty()) first_error_ = "ProduceResponse: " + (r.ok() ? std::string("unexpected shape") : r.error());
        return true;
      }
      if (resp.responses[0].partition_responses[0].error_code != 0) {
        ++produce_errors_;
        if (first_error_.empty())
          first_error_ = "Produce error code " + std::to_string(resp.responses[0].partition_responses[0].error_code);
      }
      return true;
    }
    case Kind::kApiVersions: {
      ApiVersionsResponse av;
      if (decode_api_versions_response(message.subspan(4), 3, av) < 0 || av.error_code != 0) {
        ++decode_errors_;
        conn_failed(c, "ApiVersions failed");
        return false;
      }
      if (o_.metadata) {
        MetadataRequest md;
        md.topics = std::vector<MetadataRequest::MetadataRequestTopic>{};
        MetadataRequest::MetadataRequestTopic t;
        t.name = o_.topic;
        md.topics->push_back(t);
        send_owned(c, Kind::kMetadata, MetadataRequest::kApiKey, 12, md);
      } else {
        after_handshake(c);
      }
      return true;
    }
    case Kind::kMetadata: {
      ResponseHeader rh;
      MetadataResponse md;
      bool ok = read_response_header(message, response_header_version(MetadataRequest::kApiKey, 12), rh, nullptr);
      Reader r(message.subspan(ok ? rh.size : 0));
      if (ok) md.read(r, 12);
      if (!ok || !r.ok() || md.brokers.empty()) {
        ++decode_errors_;
        conn_failed(c, "Metadata failed");
        return false;
      }
      std::string broker = std::string(md.brokers[0].host) + ":" + std::to_string(md.brokers[0].port);
      if (std::find(brokers_seen_.begin(), brokers_seen_.end(), broker) == brokers_seen_.end()) brokers_seen_.push_back(broker);
      if (!o_.expect_broker.empty() && broker != o_.expect_broker) {
        ++decode_errors_;
        if (first_error_.empty()) first_error_ = "Metadata names broker " + broker + ", expected " + o_.expect_broker;
      }
      after_handshake(c);
      return true;
    }
  }
  return true;
}

// ---- soak ------------------------------------------------------------------------------------

void Load::send_mix(Conn* c, int count) {
  for (int i = 0; i < count && !c->closing; ++i) {
    uint32_t pick = static_cast<uint32_t>(c->rng() % mix_total_);
    Kind kind = mix_.back().first;
    for (const auto& [k, upto] : mix_) {
      if (pick < upto) {
        kind = k;
        break;
      }
    }
    ++kind_sent_[static_cast<size_t>(kind)];
    switch (kind) {
      case Kind::kProduce: send_produce(c, 1); break;
      case Kind::kMetadata: {
        MetadataRequest md;
        md.topics = std::vector<MetadataRequest::MetadataRequestTopic>(1);
        (*md.topics)[0].name = o_.topic;
        send_owned(c, kind, MetadataRequest::kApiKey, 12, md);
        break;
      }
      case Kind::kFindCoordinator: {
        FindCoordinatorRequest fc;
        fc.key_type = 0;  // group
        fc.coordinator_keys = {"kproxy-soak"};
        send_owned(c, kind, FindCoordinatorRequest::kApiKey, 4, fc);
        break;
      }
      case Kind::kInitProducerId: {
        InitProducerIdRequest ip;
        ip.transactional_id = std::nullopt;  // idempotent producer
        ip.transaction_timeout_ms = 60000;
        send_owned(c, kind, InitProducerIdRequest::kApiKey, 4, ip);
        break;
      }
      case Kind::kApiVersions: {
        ApiVersionsRequest av;
        av.client_software_name = "kproxy-load";
        av.client_software_version = "0.1.0";
        send_owned(c, kind, ApiVersionsRequest::kApiKey, 3, av);
        break;
      }
      case Kind::kAddPartitionsToTxn: {  // of a producer id nobody was given: the answer is counted, whatever it says
        AddPartitionsToTxnRequest req;
        req.v3_and_below_transactional_id = "kproxy-soak";
        req.v3_and_below_producer_id = 0;
        req.v3_and_below_topics.push_back({o_.topic, {0}, {}});
        send_owned(c, kind, AddPartitionsToTxnRequest::kApiKey, 3, req);
        break;
      }
      case Kind::kEndTxn: {
        EndTxnRequest req;
        req.transactional_id = "kproxy-soak";
        req.committed = false;
        send_owned(c, kind, EndTxnRequest::kApiKey, 3, req);
        break;
      }
    }
  }
}

bool Load::on_soak_response(Conn* c, Kind kind, Bytes message) {
  ++answered_;
  ++kind_answered_[static_cast<size_t>(kind)];
  if (in_window_) ++window_answered_;
  std::string error;
  bool decoded = false;
  int16_t code = 0;
  switch (kind) {
    case Kind::kProduce: {
      ProduceResponse m;
      decoded = decode_response(message, o_.produce_version, m, &error);
      if (decoded && (m.responses.size() != 1 || m.responses[0].partition_responses.size() != 1)) {
        decoded = false;
        error = "ProduceResponse: unexpected shape";
      }
      if (decoded) code = m.responses[0].partition_responses[0].error_code;
      break;
    }
    case Kind::kMetadata: {
      MetadataResponse m;
      decoded = decode_response(message, 12, m, &error);
      if (decoded && m.topics.size() != 1) {
        decoded = false;
        error = "MetadataResponse: unexpected shape";
      }
      if (decoded) code = m.topics[0].error_code;
      break;
    }
    case Kind::kFindCoordinator: {
      FindCoordinatorResponse m;
      decoded = decode_response(message, 4, m, &error);
      if (decoded && m.coordinators.size() != 1) {
        decoded = false;
        error = "FindCoordinatorResponse: unexpected shape";
      }
      if (decoded) code = m.coordinators[0].error_code;
      break;
    }
    case Kind::kInitProducerId: {
      InitProducerIdResponse m;
      decoded = decode_response(message, 4, m, &error);
      if (decoded) code = m.error_code;
      break;
    }
    case Kind::kApiVersions: {
      ApiVersionsResponse m;
      decoded = decode_api_versions_response(message.subspan(4), 3, m) >= 0;
      if (!decoded) error = "ApiVersionsResponse does not decode";
      else code = m.error_code;
      break;
    }
    case Kind::kAddPartitionsToTxn: {
      AddPartitionsToTxnResponse m;
      decoded = decode_response(message, 3, m, &error);
      for (const auto& t : m.results_by_topic_v3_and_below)
        for (const auto& r : t.results_by_partition)
          if (code == 0) code = r.partition_error_code;
      break;
    }
    case Kind::kEndTxn: {
      EndTxnResponse m;
      decoded = decode_response(message, 3, m, &error);
      if (decoded) code = m.error_code;
      break;
    }
  }
  if (!decoded) {
    ++decode_errors_;
    if (first_error_.empty()) first_error_ = "connection " + std::to_string(c->index) + ": " + error;
  } else if (code != 0) {
    ++kind_errors_[static_cast<size_t>(kind)];
  }
  return true;
}

void Load::reopen(Conn* c) {
  int index = c->index;
  close_conn(c);
  // The closing handle still belongs to the old Conn: keep it alive until the loop ends.
  retired_.push_back(std::move(conns_[static_cast<size_t>(index)]));
  open_connection(index);
  if (auto& fresh = conns_[static_cast<size_t>(index)]) {
    fresh->reopened = true;
    // Continue the old connection's random sequence rather than repeat it.
    fresh->rng.seed(o_.seed + static_cast<uint64_t>(index) + 0x9e3779b97f4a7c15ull * (peer_closes_ + 1));
  }
}

void Load::start_window() {
  in_window_ = true;
  window_answered_ = 0;
  window_sent_ = 0;
  window_start_ns_ = uv_hrtime();
  self_cpu_start_ = cpu_seconds(std::to_string(getpid()));
  cpu_start_.clear();
  for (const auto& pid : o_.watch_pids) cpu_start_.push_back(cpu_times(pid));
  uv_timer_start(
      &phase_timer_, [](uv_timer_t* t) { static_cast<Load*>(t->data)->end_window(); }, static_cast<uint64_t>(o_.duration * 1000), 0);
}

void Load::end_window() {
  in_window_ = false;
  window_end_ns_ = uv_hrtime();
  self_cpu_end_ = cpu_seconds(std::to_string(getpid()));
  cpu_end_.clear();
  for (const auto& pid : o_.watch_pids) cpu_end_.push_back(cpu_times(pid));
  sending_ = false;
  if (timer_fd_ >= 0) uv_poll_stop(&tick_);
  // Wait (at most 3 s) for the answers still in flight, then stop.
  uv_timer_start(
      &phase_timer_, [](uv_timer_t* t) { static_cast<Load*>(t->data)->finish("answers in flight collected"); }, 3000, 0);
  if (finishing_) return;
  uv_idle_init(&loop_, &drain_check_);
  drain_check_.data = this;
  uv_idle_start(&drain_check_, [](uv_idle_t* h) {
    auto* self = static_cast<Load*>(h->data);
    bool any = false;
    for (auto& c : self->conns_) any = any || (c && !c->closing && c->inflight() > 0);
    if (!any) {
      uv_idle_stop(h);
      self->finish("every answer in");
    }
  });
}

void Load::conn_failed(Conn* c, const std::string& what) {
  if (c->closing) return;
  if (o_.mode == Mode::kSoak && c->ready && !finishing_) {
    // A fault rule closed it (or the far side went away): expected in a soak. Open it again.
    ++peer_closes_;
    reopen(c);
    return;
  }
  if (!finishing_) {
    ++failed_;
    if (first_error_.empty()) first_error_ = "connection " + std::to_string(c->index) + ": " + what;
    if (!c->ready && ready_ + failed_ == o_.connections && !ready_printed_ && !sending_) {
      close_conn(c);
      all_ready();
      return;
    }
  }
  close_conn(c);
  open_next_connections();
}

void Load::close_conn(Conn* c) {
  if (c->closing) return;
  c->closing = true;
  lost_ += c->inflight();
  // A reset, not a FIN: no TIME_WAIT left behind on this side (see the sink's close_conn).
  if (!c->connected || uv_tcp_close_reset(&c->tcp, nullptr) != 0) uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), nullptr);
}

void Load::finish(const char* why) {
  if (finishing_) return;
  finishing_ = true;
  sending_ = false;
  std::fprintf(stderr, "kproxy-load: stopping (%s)\n", why);
  if (in_window_) end_window();
  for (auto& c : conns_) {
    if (c && !c->closing) close_conn(c.get());
  }
  uv_walk(
      &loop_,
      [](uv_handle_t* h, void*) {
        if (!uv_is_closing(h)) uv_close(h, nullptr);
      },
      nullptr);
}

double percentile_us(std::vector<uint64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return static_cast<double>(sorted[rank - 1]) / 1000.0;
}

void Load::report() {
  double secs = window_end_ns_ > window_start_ns_ ? static_cast<double>(window_end_ns_ - window_start_ns_) / 1e9 : 0;
  nlohmann::json j;
  j["event"] = "result";
  j["mode"] = o_.mode == Mode::kSaturate ? "saturate" : o_.mode == Mode::kRate ? "rate" : o_.mode == Mode::kSoak ? "soak" : "idle";
  j["connections"] = o_.connections;
  j["ready"] = ready_;
  j["failed_connections"] = failed_;
  j["size"] = o_.size;
  j["frame_bytes"] = templates_.empty() ? 0 : templates_[0].size();
  j["produce_version"] = o_.produce_version;
  j["sent"] = sent_;
  j["answered"] = answered_;
  j["mismatches"] = mismatches_;
  j["unexpected_responses"] = unexpected_;
  j["produce_errors"] = produce_errors_;
  j["decode_errors"] = decode_errors_;
  j["lost"] = lost_;
  j["backlog_skips"] = backlog_skips_;
  j["brokers_seen"] = brokers_seen_;
  if (o_.transactional) {
    j["transactional"] = true;
    j["txn_produces"] = o_.txn_produces;
    j["transactions_committed"] = txn_committed_;
  }
  if (!first_error_.empty()) j["first_error"] = first_error_;
  j["window_seconds"] = secs;
  if (o_.mode == Mode::kSaturate && secs > 0) {
    double rps = static_cast<double>(window_answered_) / secs;
    j["depth"] = o_.depth;
    j["requests_per_s"] = rps;
    j["mb_per_s"] = rps * static_cast<double>(o_.size) / 1e6;
    j["window_requests"] = window_answered_;
    j["window_bytes"] = window_answered_ * o_.size;
  }
  if (o_.mode == Mode::kSoak) {
    j["depth"] = o_.depth;
    j["seed"] = o_.seed;
    j["peer_closes"] = peer_closes_;
    nlohmann::json per = nlohmann::json::object();
    for (size_t k = 0; k < kKinds; ++k) {
      if (kind_sent_[k] == 0) continue;
      per[kKindNames[k]] = {{"sent", kind_sent_[k]}, {"answered", kind_answered_[k]}, {"error_responses", kind_errors_[k]}};
    }
    j["apis"] = per;
    j["requests_per_s"] = secs > 0 ? static_cast<double>(window_answered_) / secs : 0;
  }
  if (o_.mode == Mode::kRate) {
    std::sort(samples_ns_.begin(), samples_ns_.end());
    j["target_rate"] = o_.rate;
    j["achieved_rate"] = secs > 0 ? static_cast<double>(window_sent_) / secs : 0;
    j["samples"] = samples_ns_.size();
    j["p50_us"] = percentile_us(samples_ns_, 0.50);
    j["p99_us"] = percentile_us(samples_ns_, 0.99);
    j["p999_us"] = percentile_us(samples_ns_, 0.999);
    j["max_us"] = samples_ns_.empty() ? 0 : static_cast<double>(samples_ns_.back()) / 1000.0;
  }
  if (secs > 0) {
    j["self_cpu_s"] = self_cpu_end_ - self_cpu_start_;
    // Per watched process: all its CPU in the window, and the kernel's part of it (system calls,
    // the copies of socket reads and writes): what a user-space change cannot make cheaper.
    nlohmann::json cpu = nlohmann::json::object();
    nlohmann::json sys = nlohmann::json::object();
    for (size_t i = 0; i < o_.watch_pids.size() && i < cpu_start_.size() && i < cpu_end_.size(); ++i) {
      cpu[o_.watch_pids[i]] = cpu_end_[i].total() - cpu_start_[i].total();
      sys[o_.watch_pids[i]] = cpu_end_[i].sys - cpu_start_[i].sys;
    }
    j["cpu_s"] = cpu;
    j["cpu_sys_s"] = sys;
  }
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "kproxy-load: %s: %d/%d connections ready, %llu sent, %llu answered, %llu mismatches, %llu errors, %llu lost",
               j["mode"].get<std::string>().c_str(), ready_, o_.connections, static_cast<unsigned long long>(sent_),
               static_cast<unsigned long long>(answered_), static_cast<unsigned long long>(mismatches_),
               static_cast<unsigned long long>(produce_errors_ + decode_errors_ + unexpected_), static_cast<unsigned long long>(lost_));
  if (j.contains("mb_per_s"))
    std::fprintf(stderr, "; %.0f req/s, %.1f MB/s", j["requests_per_s"].get<double>(), j["mb_per_s"].get<double>());
  if (j.contains("p99_us")) {
    std::fprintf(stderr, "; latency p50 %.0f us, p99 %.0f us, p99.9 %.0f us", j["p50_us"].get<double>(), j["p99_us"].get<double>(),
                 j["p999_us"].get<double>());
  }
  std::fprintf(stderr, "\n");
  if (o_.mode == Mode::kSoak) {
    std::fprintf(stderr, "kproxy-load: soak: %.0f answers/s; %llu connections closed by the far side and opened again;",
                 j["requests_per_s"].get<double>(), static_cast<unsigned long long>(peer_closes_));
    for (size_t k = 0; k < kKinds; ++k) {
      if (kind_sent_[k] == 0) continue;
      std::fprintf(stderr, " %s %llu/%llu (%llu errors)", kKindNames[k], static_cast<unsigned long long>(kind_answered_[k]),
                   static_cast<unsigned long long>(kind_sent_[k]), static_cast<unsigned long long>(kind_errors_[k]));
    }
    std::fprintf(stderr, "\n");
  }
  if (!first_error_.empty()) std::fprintf(stderr, "kproxy-load: first error: %s\n", first_error_.c_str());
}

int Load::run() {
  uv_loop_init(&loop_);
  build_templates();
  if (o_.mode == Mode::kSoak) {
    std::stringstream in(o_.mix);
    std::string item;
    while (std::getline(in, item, ',')) {
      auto colon = item.find(':');
      std::string name = item.substr(0, colon);
      auto it = std::find(kKindNames.begin(), kKindNames.end(), name);
      int weight = colon == std::string::npos ? 1 : std::stoi(item.substr(colon + 1));
      if (it == kKindNames.end() || weight < 0) {
        std::fprintf(stderr, "kproxy-load: --mix: unknown API or bad weight in '%s'\n", item.c_str());
        return 2;
      }
      mix_total_ += static_cast<uint32_t>(weight);
      mix_.push_back({static_cast<Kind>(it - kKindNames.begin()), mix_total_});
    }
    if (mix_total_ == 0) {
      std::fprintf(stderr, "kproxy-load: --mix has no weight\n");
      return 2;
    }
  }
  conns_.resize(static_cast<size_t>(o_.connections));
  uv_timer_init(&loop_, &phase_timer_);
  phase_timer_.data = this;
  uv_timer_init(&loop_, &deadline_timer_);
  deadline_timer_.data = this;
  double bound = o_.max_seconds > 0 ? o_.max_seconds : (o_.mode == Mode::kIdle ? o_.hold + 120 : o_.warmup + o_.duration + 30);
  uv_timer_start(
      &deadline_timer_, [](uv_timer_t* t) { static_cast<Load*>(t->data)->finish("deadline (--max-seconds)"); },
      static_cast<uint64_t>(bound * 1000), 0);
  uv_signal_init(&loop_, &sigterm_);
  uv_signal_init(&loop_, &sigint_);
  sigterm_.data = sigint_.data = this;
  uv_signal_start(
      &sigterm_, [](uv_signal_t* s, int) { static_cast<Load*>(s->data)->finish("SIGTERM"); }, SIGTERM);
  uv_signal_start(
      &sigint_, [](uv_signal_t* s, int) { static_cast<Load*>(s->data)->finish("SIGINT"); }, SIGINT);
  open_next_connections();
  uv_run(&loop_, UV_RUN_DEFAULT);
  if (timer_fd_ >= 0) ::close(timer_fd_);
  report();
  int rc = uv_loop_close(&loop_);
  if (rc != 0) std::fprintf(stderr, "kproxy-load: uv_loop_close: %s\n", uv_strerror(rc));
  // A soak expects error answers and lost in-flight requests (fault rules); nothing else.
  bool soak = o_.mode == Mode::kSoak;
  bool clean = mismatches_ == 0 && unexpected_ == 0 && (soak || produce_errors_ == 0) && decode_errors_ == 0 && failed_ == 0 &&
               (o_.mode == Mode::kIdle || soak || lost_ == 0) && ready_ == o_.connections;
  return clean ? 0 : 1;
}

void usage(FILE* out) {
  std::fputs(
      "usage: kproxy-load --target HOST:PORT [--mode saturate|rate|idle|soak] [--connections N] [--depth D]\n"
      "                   [--size BYTES] [--rate REQ_PER_S] [--duration S] [--warmup S] [--hold S]\n"
      "                   [--acks N] [--produce-version V] [--topic NAME] [--partitions P]\n"
      "                   [--metadata] [--expect-broker HOST:PORT] [--connect-concurrency N]\n"
      "                   [--watch-pid PID|PID/TID]... [--max-seconds S] [--requests N] [--source IP]\n"
      "                   [--mix API:WEIGHT,...] [--seed N]   (soak; APIs: produce, metadata,\n"
      "                    find_coordinator, init_producer_id, api_versions, add_partitions_to_txn, end_txn)\n"
      "                   [--transactional [--txn-produces N]]   (saturate, rate: transactional producers)\n",
      out);
}

size_t parse_size(const std::string& s) {
  size_t mult = 1;
  std::string n = s;
  if (n.ends_with("KiB") || n.ends_with("k") || n.ends_with("K")) mult = 1024;
  if (n.ends_with("MiB") || n.ends_with("m") || n.ends_with("M")) mult = 1024 * 1024;
  while (!n.empty() && !std::isdigit(static_cast<unsigned char>(n.back()))) n.pop_back();
  return static_cast<size_t>(std::stoull(n)) * mult;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--target") {
        std::string hp = value();
        auto colon = hp.rfind(':');
        if (colon == std::string::npos) throw std::invalid_argument("--target HOST:PORT");
        o.host = hp.substr(0, colon);
        o.port = std::stoi(hp.substr(colon + 1));
      } else if (a == "--mode") {
        std::string m = value();
        if (m == "saturate") o.mode = Mode::kSaturate;
        else if (m == "rate") o.mode = Mode::kRate;
        else if (m == "idle") o.mode = Mode::kIdle;
        else if (m == "soak") o.mode = Mode::kSoak;
        else throw std::invalid_argument("--mode saturate|rate|idle|soak");
      } else if (a == "--connections") o.connections = std::max(1, std::stoi(value()));
      else if (a == "--depth") o.depth = std::max(1, std::stoi(value()));
      else if (a == "--size") o.size = parse_size(value());
      else if (a == "--rate") o.rate = std::max(1.0, std::stod(value()));
      else if (a == "--duration") o.duration = std::stod(value());
      else if (a == "--warmup") o.warmup = std::stod(value());
      else if (a == "--hold") o.hold = std::stod(value());
      else if (a == "--acks") o.acks = std::stoi(value());
      else if (a == "--produce-version") o.produce_version = static_cast<int16_t>(std::stoi(value()));
      else if (a == "--topic") o.topic = value();
      else if (a == "--partitions") o.partitions = std::max(1, std::stoi(value()));
      else if (a == "--metadata") o.metadata = true;
      else if (a == "--expect-broker") {
        o.expect_broker = value();
        o.metadata = true;
      } else if (a == "--connect-concurrency") o.connect_concurrency = std::max(1, std::stoi(value()));
      else if (a == "--watch-pid") o.watch_pids.push_back(value());
      else if (a == "--max-seconds") o.max_seconds = std::stod(value());
      else if (a == "--requests") o.requests = std::stoull(value());
      else if (a == "--source") o.source = value();
      else if (a == "--mix") o.mix = value();
      else if (a == "--seed") o.seed = std::stoull(value());
      else if (a == "--transactional") o.transactional = true;
      else if (a == "--txn-produces") o.txn_produces = std::max(1, std::stoi(value()));
      else if (a == "-h" || a == "--help") {
        usage(stdout);
        return 0;
      } else throw std::invalid_argument("unknown option " + a);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kproxy-load: %s\n", e.what());
    usage(stderr);
    return 2;
  }
  if (o.port <= 0) {
    std::fprintf(stderr, "kproxy-load: --target HOST:PORT is required\n");
    return 2;
  }
  if (o.produce_version < ProduceRequest::kMinVersion || o.produce_version > 12) {
    std::fprintf(stderr, "kproxy-load: --produce-version must be 3..12 (v13 names topics by id)\n");
    return 2;
  }
  if (o.transactional && (o.mode == Mode::kSoak || o.mode == Mode::kIdle || o.acks == 0)) {
    std::fprintf(stderr, "kproxy-load: --transactional is for saturate and rate modes with acks != 0\n");
    return 2;
  }
  if ((o.mode == Mode::kSaturate || o.mode == Mode::kSoak) && o.acks == 0) {
    std::fprintf(stderr, "kproxy-load: saturate mode paces on responses: --acks 0 is not supported there\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  // Many idle connections need many descriptors: take the hard limit.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  Load load(o);
  return load.run();
}
