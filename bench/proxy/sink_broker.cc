// kproxy-sink-broker: a fake Kafka broker that answers at once, for benchmarks and soak tests.
//
//   kproxy-sink-broker [--listen 127.0.0.1:0] [--advertise HOST] [--topic bench] [--partitions 8]
//                      [--threads 1] [--max-seconds 0]
//
// It speaks just enough Kafka for a producer: ApiVersions (advertising the codec's version ranges
// of the APIs below), Metadata (one broker, node 0 = itself at its own host:port, every topic asked
// for has --partitions partitions led by node 0, so a proxy's broker-address rewrite has something
// to rewrite), Produce (success for every partition; acks=0 gets no response), InitProducerId,
// FindCoordinator (node 0), and AddPartitionsToTxn and EndTxn (success; for the transactional
// load of kproxy-load --transactional: no transaction state is kept). Records are never looked at.
// Any other API closes the connection.
//
// It prints "listening on HOST:PORT" on stdout once it accepts (port 0 picks a free port) and a
// line of counts on stderr when it exits (SIGTERM/SIGINT, or --max-seconds).
//
//   client ──► read (shared 64 KiB buffer, or straight into the frame's own buffer when a frame
//              is larger) ──► frame ──► decode header (+ body where the answer needs it)
//          ◄── one uv_try_write / uv_write per read callback ◄── encoded responses
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>
#include <uv.h>

#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/request_header.h"
#include "codec/response_header.h"

namespace {

using namespace kproxy::codec;

/// Largest request frame accepted (Kafka's socket.request.max.bytes is 100 MiB).
constexpr size_t kMaxFrameBytes = 128u << 20;
/// Reads land in one shared buffer of this size unless a larger frame is being assembled.
constexpr size_t kReadBufferBytes = 64u << 10;
/// Stop reading a client whose responses pile up beyond this (it does not read them).
constexpr size_t kOutHighWater = 8u << 20;
constexpr size_t kOutLowWater = 1u << 20;
constexpr int16_t kUnsupportedVersion = 35;

/// The APIs the sink answers.
constexpr int16_t kAnswered[] = {static_cast<int16_t>(ApiKey::kProduce),         static_cast<int16_t>(ApiKey::kMetadata),
                                 static_cast<int16_t>(ApiKey::kFindCoordinator), static_cast<int16_t>(ApiKey::kApiVersions),
                                 static_cast<int16_t>(ApiKey::kInitProducerId),  static_cast<int16_t>(ApiKey::kAddPartitionsToTxn),
                                 static_cast<int16_t>(ApiKey::kEndTxn)};

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string advertise;  // default: host
  std::string topic = "bench";
  int partitions = 8;
  int threads = 1;
  double max_seconds = 0;
};

struct Counts {
  std::atomic<uint64_t> connections{0}, requests{0}, produce{0}, produce_acks0{0}, request_bytes{0}, refused{0};
};

Counts g_counts;

/// A stable topic id per name (FNV-1a spread over 16 bytes); the sink has no topic store.
Uuid topic_id_for(std::string_view name) {
  Uuid id{};
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  for (int i = 0; i < 16; ++i) {
    h = (h ^ static_cast<uint64_t>(i)) * 1099511628211ull;
    id[static_cast<size_t>(i)] = static_cast<uint8_t>(h >> 32);
  }
  return id;
}

class Worker;

/// One client connection.
struct Conn {
  uv_tcp_t tcp;
  Worker* worker = nullptr;
  // An incomplete frame: `need` bytes in total (0 while its size prefix is incomplete), `have` so far.
  std::unique_ptr<uint8_t[]> frame;
  size_t frame_cap = 0, have = 0, need = 0;
  std::vector<uint8_t> out;  // responses not yet handed to libuv
  size_t writing = 0;        // bytes inside uv_write requests
  bool reading = false, closing = false;
  int64_t next_offset = 0;

  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp); }
  void ensure_frame(size_t n) {
    if (frame_cap >= n) return;
    auto bigger = std::make_unique_for_overwrite<uint8_t[]>(n);
    if (have) std::memcpy(bigger.get(), frame.get(), have);
    frame = std::move(bigger);
    frame_cap = n;
  }
};

struct WriteReq {
  uv_write_t req;
  Conn* conn;
  std::vector<uint8_t> data;
};

class Worker {
 public:
  Worker(const Options& o, int index) : opts_(o), index_(index) {}

  /// Binds (SO_REUSEPORT, so every worker can share the port). Returns the bound port, or -1.
  int bind(int port) {
    uv_loop_init(&loop_);
    uv_tcp_init_ex(&loop_, &listener_, AF_INET);
    listener_.data = this;
    uv_os_fd_t fd;
    uv_fileno(reinterpret_cast<uv_handle_t*>(&listener_), &fd);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    sockaddr_in addr{};
    if (uv_ip4_addr(opts_.host.c_str(), port, &addr) != 0) return -1;
    if (int rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&addr), 0); rc != 0) {
      std::fprintf(stderr, "sink: bind %s:%d: %s\n", opts_.host.c_str(), port, uv_strerror(rc));
      return -1;
    }
    if (int rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 4096, on_connection); rc != 0) {
      std::fprintf(stderr, "sink: listen: %s\n", uv_strerror(rc));
      return -1;
    }
    sockaddr_storage bound{};
    int len = sizeof(bound);
    uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    uv_async_init(&loop_, &stop_, [](uv_async_t* a) { static_cast<Worker*>(a->data)->close_all(); });
    stop_.data = this;
    return port_;
  }

  void set_port(int port) { port_ = port; }
  uv_loop_t* loop() { return &loop_; }
  void run() {
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
  }
  /// Thread-safe.
  void stop() { uv_async_send(&stop_); }

 private:
  static void on_connection(uv_stream_t* server, int status) {
    auto* self = static_cast<Worker*>(server->data);
    if (status < 0) return;
    auto* c = new Conn;
    c->worker = self;
    uv_tcp_init(&self->loop_, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, c->stream()) != 0) {
      uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), on_closed);
      return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    g_counts.connections.fetch_add(1, std::memory_order_relaxed);
    start_reading(c);
  }

  static void start_reading(Conn* c) {
    if (c->reading || c->closing) return;
    if (uv_read_start(c->stream(), on_alloc, after_read) == 0) c->reading = true;
  }

  static void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
    auto* c = static_cast<Conn*>(h->data);
    // A large frame whose size is known is read straight into its own buffer: no copy.
    if (c->need > kReadBufferBytes && c->have < c->need) {
      *buf = uv_buf_init(reinterpret_cast<char*>(c->frame.get() + c->have), static_cast<unsigned>(c->need - c->have));
      return;
    }
    static thread_local std::unique_ptr<char[]> shared(new char[kReadBufferBytes]);
    *buf = uv_buf_init(shared.get(), kReadBufferBytes);
  }

  static void after_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
    auto* c = static_cast<Conn*>(s->data);
    if (c->closing) return;
    if (n < 0) {
      close_conn(c);
      return;
    }
    if (n == 0) return;
    g_counts.request_bytes.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    Worker* self = c->worker;
    const auto* data = reinterpret_cast<const uint8_t*>(buf->base);
    size_t len = static_cast<size_t>(n);
    if (c->frame && data == c->frame.get() + c->have) {
      c->have += len;
      if (c->have == c->need) {
        size_t total = c->need;
        c->have = c->need = 0;
        if (!self->on_frame(c, Bytes(c->frame.get(), total))) return;
      }
    } else if (!self->feed(c, Bytes(data, len))) {
      return;
    }
    self->flush(c);
  }

  // Assembles frames from a piece read into the shared buffer.
  bool feed(Conn* c, Bytes data) {
    size_t pos = 0;
    if (c->have > 0) {  // finish the frame started earlier
      if (c->need == 0) {
        size_t take = std::min(kFrameSizePrefix - c->have, data.size());
        c->ensure_frame(kFrameSizePrefix);
        std::memcpy(c->frame.get() + c->have, data.data(), take);
        c->have += take;
        pos = take;
        if (c->have < kFrameSizePrefix) return true;
        int64_t size = frame_size(c->frame.get());
        if (size < 0) return refuse(c);
        c->need = kFrameSizePrefix + static_cast<size_t>(size);
        c->ensure_frame(c->need);
      }
      size_t take = std::min(c->need - c->have, data.size() - pos);
      std::memcpy(c->frame.get() + c->have, data.data() + pos, take);
      c->have += take;
      pos += take;
      if (c->have < c->need) return true;
      size_t total = c->need;
      c->have = c->need = 0;
      if (!on_frame(c, Bytes(c->frame.get(), total))) return false;
    }
    while (data.size() - pos >= kFrameSizePrefix) {
      int64_t size = frame_size(data.data() + pos);
      if (size < 0) return refuse(c);
      size_t total = kFrameSizePrefix + static_cast<size_t>(size);
      if (data.size() - pos < total) {
        c->need = total;
        break;
      }
      if (!on_frame(c, data.subspan(pos, total))) return false;
      pos += total;
    }
    if (pos < data.size()) {
      c->have = 0;
      c->ensure_frame(std::max(c->need, kFrameSizePrefix));
      std::memcpy(c->frame.get(), data.data() + pos, data.size() - pos);
      c->have = data.size() - pos;
    }
    return true;
  }

  static int64_t frame_size(const uint8_t* p) {
    auto size = static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]});
    if (size < 0 || static_cast<size_t>(size) > kMaxFrameBytes) return -1;
    return size;
  }

  bool refuse(Conn* c) {
    g_counts.refused.fetch_add(1, std::memory_order_relaxed);
    close_conn(c);
    return false;
  }

  // Answers one request frame (size prefix included). False when the connection was closed.
  bool on_frame(Conn* c, Bytes frame) {
    Bytes message = frame.subspan(kFrameSizePrefix);
    RequestHeader h;
    if (!read_request_header(message, h, nullptr) || h.header_version < 0) return refuse(c);
    g_counts.requests.fetch_add(1, std::memory_order_relaxed);
    Reader r(message.subspan(h.size));
    switch (static_cast<ApiKey>(h.api_key)) {
      case ApiKey::kApiVersions: return answer_api_versions(c, h);
      case ApiKey::kMetadata: return answer_metadata(c, h, r);
      case ApiKey::kProduce: return answer_produce(c, h, r);
      case ApiKey::kInitProducerId: return answer_init_producer_id(c, h, r);
      case ApiKey::kFindCoordinator: return answer_find_coordinator(c, h, r);
      case ApiKey::kAddPartitionsToTxn: return answer_add_partitions_to_txn(c, h, r);
      case ApiKey::kEndTxn: return answer_end_txn(c, h, r);
      default: return refuse(c);
    }
  }

  template <class M>
  void respond(Conn* c, const RequestHeader& req, int16_t version, const M& body, int header_version = -2) {
    ResponseHeader rh;
    rh.correlation_id = req.correlation_id;
    rh.header_version = header_version == -2 ? response_header_version(req.api_key, version) : header_version;
    Writer w(c->out);
    size_t start = c->out.size();
    w.int32(0);
    write_response_header(w, rh);
    body.write(w, version);
    w.patch_int32(start, static_cast<int32_t>(c->out.size() - start - kFrameSizePrefix));
  }

  bool answer_api_versions(Conn* c, const RequestHeader& h) {
    ApiVersionsResponse resp;
    int16_t version = h.api_version;
    if (version > ApiVersionsResponse::kMaxVersion) {
      // What a broker does for a version it does not know: a v0 body with UNSUPPORTED_VERSION.
      version = 0;
      resp.error_code = kUnsupportedVersion;
      resp.api_keys.push_back({ApiVersionsRequest::kApiKey, ApiVersionsRequest::kMinVersion, ApiVersionsRequest::kMaxVersion, {}});
    } else {
      for (int16_t key : kAnswered) {
        VersionRange v = request_versions(key);
        resp.api_keys.push_back({key, v.min, v.max, {}});
      }
    }
    respond(c, h, version, resp, 0);  // ApiVersions responses always have header v0
    return true;
  }

  void add_topic(MetadataResponse& resp, std::string_view name, const Uuid& id) {
    MetadataResponse::MetadataResponseTopic t;
    t.name = name;
    t.topic_id = id;
    for (int i = 0; i < opts_.partitions; ++i) {
      MetadataResponse::MetadataResponsePartition p;
      p.partition_index = i;
      p.leader_id = 0;
      p.leader_epoch = 0;
      p.replica_nodes = {0};
      p.isr_nodes = {0};
      t.partitions.push_back(std::move(p));
    }
    resp.topics.push_back(std::move(t));
  }

  bool answer_metadata(Conn* c, const RequestHeader& h, Reader& r) {
    MetadataRequest req;
    req.read(r, h.api_version);
    if (!r.ok()) return refuse(c);
    MetadataResponse resp;
    const std::string& host = opts_.advertise.empty() ? opts_.host : opts_.advertise;
    resp.brokers.push_back({0, host, port_, std::nullopt, {}});
    resp.cluster_id = "kproxy-sink-broker";
    resp.controller_id = 0;
    Uuid bench_id = topic_id_for(opts_.topic);
    if (!req.topics) {
      add_topic(resp, opts_.topic, bench_id);  // null = every topic
    } else {
      for (const auto& t : *req.topics) {
        if (t.name) add_topic(resp, *t.name, topic_id_for(*t.name));
        else if (t.topic_id == bench_id) add_topic(resp, opts_.topic, bench_id);
      }
    }
    respond(c, h, h.api_version, resp);
    return true;
  }

  bool answer_produce(Conn* c, const RequestHeader& h, Reader& r) {
    ProduceRequest req;
    req.read(r, h.api_version);
    if (!r.ok()) return refuse(c);
    g_counts.produce.fetch_add(1, std::memory_order_relaxed);
    if (req.acks == 0) {
      g_counts.produce_acks0.fetch_add(1, std::memory_order_relaxed);
      return true;  // acks=0: the broker sends nothing back
    }
    ProduceResponse resp;
    resp.responses.reserve(req.topic_data.size());
    for (const auto& t : req.topic_data) {
      ProduceResponse::TopicProduceResponse tr;
      tr.name = t.name;
      tr.topic_id = t.topic_id;
      tr.partition_responses.reserve(t.partition_data.size());
      for (const auto& p : t.partition_data) {
        ProduceResponse::PartitionProduceResponse pr;
        pr.index = p.index;
        pr.base_offset = c->next_offset++;
        pr.log_start_offset = 0;
        tr.partition_responses.push_back(std::move(pr));
      }
      resp.responses.push_back(std::move(tr));
    }
    respond(c, h, h.api_version, resp);
    return true;
  }

  bool answer_init_producer_id(Conn* c, const RequestHeader& h, Reader& r) {
    InitProducerIdRequest req;
    req.read(r, h.api_version);
    if (!r.ok()) return refuse(c);
    static std::atomic<int64_t> next_producer_id{1000};
    InitProducerIdResponse resp;
    resp.producer_id = next_producer_id.fetch_add(1);
    resp.producer_epoch = 0;
    respond(c, h, h.api_version, resp);
    return true;
  }

  bool answer_find_coordinator(Conn* c, const RequestHeader& h, Reader& r) {
    FindCoordinatorRequest req;
    req.read(r, h.api_version);
    if (!r.ok()) return refuse(c);
    FindCoordinatorResponse resp;
    const std::string& host = opts_.advertise.empty() ? opts_.host : opts_.advertise;
    if (h.api_version <= 3) {
      resp.node_id = 0;
      resp.host = host;
      resp.port = port_;
    } else {
      for (auto key : req.coordinator_keys) resp.coordinators.push_back({key, 0, host, port_, 0, std::nullopt, {}});
    }
    respond(c, h, h.api_version, resp);
    return true;
  }

  bool answer_add_partitions_to_txn(Conn* c, const RequestHeader& h, Reader& r) {
    AddPartitionsToTxnRequest req;
    req.read(r, h.api_version);
    if (!r.ok()) return refuse(c);
    AddPartitionsToTxnResponse resp;
    auto results = [](const std::vector<AddPartitionsToTxnRequest::AddPartitionsToTxnTopic>& topics) {
      std::vector<AddPartitionsToTxnResponse::AddPartitionsToTxnTopicResult> out;
      for (const auto& t : topics) {
        AddPartitionsToTxnResponse::AddPartitionsToTxnTopicResult tr;
        tr.name = t.name;
        for (int32_t p : t.partitions) tr.results_by_partition.push_back({p, 0, {}});
        out.push_back(std::move(tr));
      }
      return out;
    };
    if (h.api_version <= 3) {
      resp.results_by_topic_v3_and_below = results(req.v3_and_below_topics);
    } else {
      for (const auto& x : req.transactions) resp.results_by_transaction.push_back({x.transactional_id, results(x.topics), {}});
    }
    respond(c, h, h.api_version, resp);
    return true;
  }

  bool answer_end_txn(Conn* c, const RequestHeader& h, Reader& r) {
    EndTxnRequest req;
    req.read(r, h.api_version);
    if (!r.ok()) return refuse(c);
    EndTxnResponse resp;
    if (h.api_version >= 5) {  // transaction.version 2: the epoch the next transaction uses
      resp.producer_id = req.producer_id;
      resp.producer_epoch = static_cast<int16_t>(req.producer_epoch + 1);
    }
    respond(c, h, h.api_version, resp);
    return true;
  }

  void flush(Conn* c) {
    if (c->closing || c->out.empty() || c->writing > 0) return;
    uv_buf_t b = uv_buf_init(reinterpret_cast<char*>(c->out.data()), static_cast<unsigned>(c->out.size()));
    int n = uv_try_write(c->stream(), &b, 1);
    if (n == UV_EAGAIN) n = 0;
    if (n < 0) {
      close_conn(c);
      return;
    }
    if (static_cast<size_t>(n) == c->out.size()) {
      c->out.clear();
      return;
    }
    auto* w = new WriteReq{uv_write_t{}, c, std::vector<uint8_t>(c->out.begin() + n, c->out.end())};
    c->out.clear();
    c->writing += w->data.size();
    w->req.data = w;
    b = uv_buf_init(reinterpret_cast<char*>(w->data.data()), static_cast<unsigned>(w->data.size()));
    if (uv_write(&w->req, c->stream(), &b, 1, after_write) != 0) {
      c->writing -= w->data.size();
      delete w;
      close_conn(c);
      return;
    }
    if (c->writing + c->out.size() > kOutHighWater && c->reading) {
      uv_read_stop(c->stream());
      c->reading = false;
    }
  }

  static void after_write(uv_write_t* req, int status) {
    auto* w = static_cast<WriteReq*>(req->data);
    Conn* c = w->conn;
    c->writing -= w->data.size();
    delete w;
    if (status < 0 || c->closing) return;
    c->worker->flush(c);
    if (!c->reading && c->writing + c->out.size() < kOutLowWater) start_reading(c);
  }

  // Closes with a reset (SO_LINGER 0): a peer that already sent its FIN leaves FIN_WAIT_2 at once
  // instead of holding its port in TIME_WAIT for a minute. After 2 x 10,000 idle connections, TIME_WAIT
  // sockets would otherwise hold most of the ephemeral ports and later binds would fail.
  static void close_conn(Conn* c) {
    if (c->closing) return;
    c->closing = true;
    if (uv_tcp_close_reset(&c->tcp, on_closed) != 0) uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), on_closed);
  }

  static void on_closed(uv_handle_t* h) { delete static_cast<Conn*>(h->data); }

  void close_all() {
    uv_walk(
        &loop_,
        [](uv_handle_t* h, void* arg) {
          if (uv_is_closing(h)) return;
          auto* self = static_cast<Worker*>(arg);
          if (h->type == UV_TCP && h != reinterpret_cast<uv_handle_t*>(&self->listener_)) close_conn(static_cast<Conn*>(h->data));
          else uv_close(h, nullptr);
        },
        this);
  }

  friend int main_impl(int, char**);
  const Options& opts_;
  int index_;
  int port_ = 0;
  uv_loop_t loop_;
  uv_tcp_t listener_;
  uv_async_t stop_;
};

void usage() {
  std::fputs(
      "usage: kproxy-sink-broker [--listen HOST:PORT] [--advertise HOST] [--topic NAME] [--partitions N]\n"
      "                          [--threads N] [--max-seconds S]\n",
      stderr);
}

}  // namespace

int main_impl(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--listen") {
      std::string hp = value();
      auto colon = hp.rfind(':');
      if (colon == std::string::npos) {
        usage();
        return 2;
      }
      o.host = hp.substr(0, colon);
      o.port = std::stoi(hp.substr(colon + 1));
    } else if (a == "--advertise") o.advertise = value();
    else if (a == "--topic") o.topic = value();
    else if (a == "--partitions") o.partitions = std::max(1, std::stoi(value()));
    else if (a == "--threads") o.threads = std::max(1, std::stoi(value()));
    else if (a == "--max-seconds") o.max_seconds = std::stod(value());
    else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      usage();
      return 2;
    }
  }
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::unique_ptr<Worker>> workers;
  int port = o.port;
  for (int i = 0; i < o.threads; ++i) {
    workers.push_back(std::make_unique<Worker>(o, i));
    int bound = workers.back()->bind(port);
    if (bound < 0) return 1;
    port = bound;
  }
  for (auto& w : workers) w->set_port(port);
  std::printf("listening on %s:%d\n", o.host.c_str(), port);
  std::fflush(stdout);

  // Worker 0 runs on the main thread, which also takes the signals and the deadline.
  Worker& main_worker = *workers[0];
  uv_signal_t sigterm, sigint;
  uv_timer_t deadline;
  static std::vector<std::unique_ptr<Worker>>* all = &workers;
  uv_signal_init(main_worker.loop(), &sigterm);
  uv_signal_init(main_worker.loop(), &sigint);
  uv_signal_start(
      &sigterm,
      [](uv_signal_t*, int) {
        for (auto& w : *all) w->stop();
      },
      SIGTERM);
  uv_signal_start(
      &sigint,
      [](uv_signal_t*, int) {
        for (auto& w : *all) w->stop();
      },
      SIGINT);
  uv_timer_init(main_worker.loop(), &deadline);
  if (o.max_seconds > 0) {
    uv_timer_start(
        &deadline,
        [](uv_timer_t*) {
          for (auto& w : *all) w->stop();
        },
        static_cast<uint64_t>(o.max_seconds * 1000), 0);
  }
  std::vector<std::thread> threads;
  for (size_t i = 1; i < workers.size(); ++i) threads.emplace_back([w = workers[i].get()] { w->run(); });
  main_worker.run();
  for (auto& t : threads) t.join();
  std::fprintf(stderr, "sink: %llu connections, %llu requests (%llu Produce, %llu with acks=0), %.1f MB received, %llu refused\n",
               static_cast<unsigned long long>(g_counts.connections.load()), static_cast<unsigned long long>(g_counts.requests.load()),
               static_cast<unsigned long long>(g_counts.produce.load()), static_cast<unsigned long long>(g_counts.produce_acks0.load()),
               static_cast<double>(g_counts.request_bytes.load()) / 1e6, static_cast<unsigned long long>(g_counts.refused.load()));
  return 0;
}

int main(int argc, char** argv) { return main_impl(argc, argv); }
