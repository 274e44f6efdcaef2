#include "proxy/toxiproxy/toxic_relay.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include <uv.h>

#include "config/host_port.h"
#include "proxy/net/bound_socket.h"
#include "proxy/net/uv_handle.h"

namespace kproxy::toxiproxy {

using net::UvHandle;

namespace {

/// A direction holding more than this (queued and being written) stops reading its source...
constexpr size_t kPauseBytes = 1 << 20;
/// ...until it holds less than this.
constexpr size_t kResumeBytes = 256 << 10;
constexpr size_t kReadBytes = 64 << 10;

uint64_t now_us() { return uv_hrtime() / 1000; }

struct Link;

/// One enabled proxy on the loop: its listening socket, upstream and toxics.
struct RelayProxy {
  std::string name;
  sockaddr_storage upstream{};
  UvHandle<uv_tcp_t> server;
  std::shared_ptr<const std::vector<ToxicSpec>> toxics = std::make_shared<const std::vector<ToxicSpec>>();
  std::set<Link*> links;
  ToxicRelay::Loop* loop = nullptr;
  /// Set by ProxyHost::on_first_connection: new connections are held (not connected upstream)
  /// until ProxyHost::release; `first` is called at the first one.
  bool hold = false;
  std::function<void()> first;
};

/// Bytes waiting for their release time.
struct Piece {
  uint64_t due_us = 0;
  std::string bytes;
};

/// One way through a link: upstream (client → server) or downstream (server → client).
struct Direction {
  explicit Direction(Stream s) : stream(s) {}
  Stream stream;
  std::deque<Piece> queue;
  size_t queued = 0;
  std::string held;  ///< read while a timeout toxic stops this direction
  uint64_t last_due = 0;
  uint64_t passed = 0;  ///< bytes let through so far (limit_data)
  bool source_done = false;
  bool paused = false;
  uint64_t close_at_us = 0;  ///< slow_close: when the close is passed on (0: not yet known)
  UvHandle<uv_timer_t> timer;
};

/// Whether one toxic applies to one connection (drawn once, Toxiproxy's toxicity) and since when.
struct Draw {
  bool on = false;
  uint64_t since_us = 0;
};

/// One client connection and its upstream connection.
struct Link {
  RelayProxy* proxy = nullptr;
  UvHandle<uv_tcp_t> client, server;
  Direction up{Stream::kUpstream}, down{Stream::kDownstream};
  UvHandle<uv_timer_t> fate;  ///< the earliest reset_peer / timeout deadline
  std::map<std::string, Draw> draws;
  bool connected = false;
  bool held = false;               ///< accepted while the proxy holds connections: not connected upstream yet
  bool close_after_flush = false;  ///< limit_data reached

  uv_stream_t* source(const Direction& d) const { return d.stream == Stream::kUpstream ? client.stream() : server.stream(); }
  uv_stream_t* sink(const Direction& d) const { return d.stream == Stream::kUpstream ? server.stream() : client.stream(); }
};

struct WriteRequest {
  uv_write_t req;
  std::string bytes;
};

}  // namespace

struct ToxicRelay::Loop {
  uv_loop_t loop{};
  UvHandle<uv_async_t> wake;
  std::mutex mutex;
  std::vector<std::function<void()>> tasks;  ///< under mutex
  bool stopping = false;                     ///< under mutex: no task is taken any more
  std::map<std::string, std::unique_ptr<RelayProxy>> proxies;
  std::mt19937_64 random{std::random_device{}()};
  std::atomic<size_t>* connections = nullptr;

  /// Runs `task` on the loop thread and waits for it. False (not run) once stopping.
  bool run(const std::function<void()>& task) {
    std::promise<void> done;
    auto finished = done.get_future();
    {
      std::lock_guard lock(mutex);
      if (stopping) return false;
      tasks.push_back([&task, &done] {
        task();
        done.set_value();
      });
      uv_async_send(wake.get());  // under the lock: the loop closes `wake` only after taking it
    }
    finished.wait();
    return true;
  }

  static void on_wake(uv_async_t* handle) {
    auto* self = static_cast<Loop*>(handle->data);
    if (!self) return;
    for (;;) {
      std::vector<std::function<void()>> batch;
      {
        std::lock_guard lock(self->mutex);
        batch.swap(self->tasks);
      }
      if (batch.empty()) return;
      for (auto& t : batch) t();
    }
  }

  // --- toxics of a connection ----------------------------------------------------------------

  /// The toxics of `stream` that this connection has (drawing the ones not seen yet).
  std::vector<const ToxicSpec*> active(Link& l, Stream stream) {
    std::vector<const ToxicSpec*> out;
    for (const auto& t : *l.proxy->toxics) {
      if (t.stream != stream || is_kafka_toxic(t.type)) continue;
      auto [it, fresh] = l.draws.try_emplace(t.name);
      if (fresh) it->second = {std::uniform_real_distribution<double>(0.0, 1.0)(random) < t.toxicity, now_us()};
      if (it->second.on) out.push_back(&t);
    }
    return out;
  }

  static const ToxicSpec* find(const std::vector<const ToxicSpec*>& toxics, std::string_view type) {
    for (const auto* t : toxics) {
      if (t->type == type) return t;
    }
    return nullptr;
  }

  // --- connections ---------------------------------------------------------------------------

  void destroy(Link* l, bool reset = false) {
    if (reset) {
      // SO_LINGER with a zero timeout: the close sends RST instead of FIN (Toxiproxy's reset_peer).
      linger no_linger{1, 0};
      for (auto* h : {l->client.base(), l->server.base()}) {
        uv_os_fd_t fd;
        if (h && uv_fileno(h, &fd) == 0) ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &no_linger, sizeof(no_linger));
      }
    }
    l->proxy->links.erase(l);
    connections->fetch_sub(1);
    delete l;  // every handle closes with it (UvHandle); callbacks still due find no owner
  }

  static void on_connection(uv_stream_t* listener, int status) {
    auto* p = static_cast<RelayProxy*>(listener->data);
    if (!p || status < 0) return;
    Loop& self = *p->loop;
    auto* l = new Link;
    l->proxy = p;
    p->links.insert(l);
    self.connections->fetch_add(1);
    l->client.init(&self.loop, l, uv_tcp_init);
    l->server.init(&self.loop, l, uv_tcp_init);
    l->up.timer.init(&self.loop, l, uv_timer_init);
    l->down.timer.init(&self.loop, l, uv_timer_init);
    l->fate.init(&self.loop, l, uv_timer_init);
    if (uv_accept(listener, l->client.stream()) != 0) {
      self.destroy(l);
      return;
    }
    uv_tcp_nodelay(l->client.get(), 1);
    uv_tcp_nodelay(l->server.get(), 1);
    if (p->hold) {
      l->held = true;
      if (auto first = std::move(p->first)) {
        p->first = nullptr;
        first();
      }
      return;
    }
    self.connect_upstream(l);
  }

  void connect_upstream(Link* l) {
    auto* connect = new uv_connect_t;
    if (uv_tcp_connect(connect, l->server.get(), reinterpret_cast<const sockaddr*>(&l->proxy->upstream), on_connected) != 0) {
      delete connect;
      destroy(l);  // Toxiproxy closes the client when the upstream cannot be reached
    }
  }

  /// The held connections of `p` go on to the upstream; later ones are not held.
  void release(RelayProxy& p) {
    p.hold = false;
    p.first = nullptr;
    std::vector<Link*> held;
    for (Link* l : p.links) {
      if (l->held) held.push_back(l);
    }
    for (Link* l : held) {
      l->held = false;
      connect_upstream(l);
    }
  }

  static void on_connected(uv_connect_t* req, int status) {
    auto* l = static_cast<Link*>(req->handle->data);
    delete req;
    if (!l) return;
    Loop& self = *l->proxy->loop;
    if (status < 0) {
      self.destroy(l);
      return;
    }
    l->connected = true;
    uv_read_start(l->client.stream(), on_alloc, on_read);
    uv_read_start(l->server.stream(), on_alloc, on_read);
    self.arm_fate(*l);
  }

  static void on_alloc(uv_handle_t*, size_t, uv_buf_t* buf) { *buf = uv_buf_init(new char[kReadBytes], kReadBytes); }

  static void on_read(uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
    std::unique_ptr<char[]> owned(buf->base);
    auto* l = static_cast<Link*>(stream->data);
    if (!l) return;
    Loop& self = *l->proxy->loop;
    Direction& d = stream == l->client.stream() ? l->up : l->down;
    if (n > 0) {
      self.take(*l, d, std::string(buf->base, static_cast<size_t>(n)));
    } else if (n < 0) {
      d.source_done = true;
      uv_read_stop(stream);
      self.flush(*l, d);
    }
  }

  /// Data read from `d`'s source: queued as pieces with their release times.
  void take(Link& l, Direction& d, std::string data) {
    auto toxics = active(l, d.stream);
    if (find(toxics, "timeout")) {
      d.held += data;  // Toxiproxy's timeout: nothing passes until the toxic is removed
      return;
    }
    if (const auto* limit = find(toxics, "limit_data")) {
      const uint64_t bytes = static_cast<uint64_t>(limit->attribute("bytes"));
      const uint64_t room = d.passed >= bytes ? 0 : bytes - d.passed;
      if (data.size() >= room) {
        data.resize(room);
        l.close_after_flush = true;
      }
    }
    d.passed += data.size();
    const uint64_t now = now_us();
    uint64_t start = now;
    if (const auto* lag = find(toxics, "latency")) {
      int64_t delay_ms = lag->attribute("latency");
      if (int64_t jitter = lag->attribute("jitter"); jitter > 0)
        delay_ms += std::uniform_int_distribution<int64_t>(-jitter, jitter)(random);
      start += static_cast<uint64_t>(std::max<int64_t>(0, delay_ms)) * 1000;
    }
    std::vector<std::string> pieces;
    uint64_t slice_delay_us = 0;
    if (const auto* slicer = find(toxics, "slicer"); slicer && slicer->attribute("average_size") > 0) {
      const int64_t average = slicer->attribute("average_size");
      const int64_t variation = std::min(slicer->attribute("size_variation"), average - 1);
      slice_delay_us = static_cast<uint64_t>(slicer->attribute("delay"));
      for (size_t at = 0; at < data.size();) {
        int64_t size = average + (variation > 0 ? std::uniform_int_distribution<int64_t>(-variation, variation)(random) : 0);
        size_t n = std::min(data.size() - at, static_cast<size_t>(std::max<int64_t>(1, size)));
        pieces.push_back(data.substr(at, n));
        at += n;
      }
    } else if (!data.empty()) {
      pieces.push_back(std::move(data));
    }
    const auto* bandwidth = find(toxics, "bandwidth");
    const int64_t rate = bandwidth ? bandwidth->attribute("rate") : 0;  // KB/s = bytes per ms
    uint64_t due = std::max(start, d.last_due);
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (i > 0) due += slice_delay_us;
      if (rate > 0) due += pieces[i].size() * 1000 / static_cast<uint64_t>(rate);
      d.queued += pieces[i].size();
      d.queue.push_back({due, std::move(pieces[i])});
    }
    d.last_due = due;
    if (!d.paused && d.queued + uv_stream_get_write_queue_size(l.sink(d)) > kPauseBytes) {
      uv_read_stop(l.source(d));
      d.paused = true;
    }
    flush(l, d);
  }

  static void on_up_timer(uv_timer_t* t) { on_timer(t, true); }
  static void on_down_timer(uv_timer_t* t) { on_timer(t, false); }
  static void on_timer(uv_timer_t* t, bool up) {
    auto* l = static_cast<Link*>(t->data);
    if (l) l->proxy->loop->flush(*l, up ? l->up : l->down);
  }

  /// Writes the pieces that are due; arms the timer for the next; passes a close on once drained.
  void flush(Link& l, Direction& d) {
    const uint64_t now = now_us();
    while (!d.queue.empty() && d.queue.front().due_us <= now + 500) {
      auto* w = new WriteRequest;
      w->bytes = std::move(d.queue.front().bytes);
      d.queued -= w->bytes.size();
      d.queue.pop_front();
      uv_buf_t buf = uv_buf_init(w->bytes.data(), static_cast<unsigned>(w->bytes.size()));
      if (uv_write(&w->req, l.sink(d), &buf, 1, on_written) != 0) {
        delete w;
        destroy(&l);
        return;
      }
    }
    auto timer_cb = d.stream == Stream::kUpstream ? on_up_timer : on_down_timer;
    if (!d.queue.empty()) {
      uv_timer_start(d.timer.get(), timer_cb, (d.queue.front().due_us - std::min(now, d.queue.front().due_us) + 999) / 1000, 0);
      return;
    }
    if (l.close_after_flush) {
      destroy(&l);
      return;
    }
    if (d.source_done) {
      // slow_close: the close reaches the other side `delay` ms late.
      if (d.close_at_us == 0) {
        const auto* slow = find(active(l, d.stream), "slow_close");
        d.close_at_us = now + (slow ? static_cast<uint64_t>(slow->attribute("delay")) * 1000 : 0);
      }
      if (d.close_at_us > now) {
        uv_timer_start(d.timer.get(), timer_cb, (d.close_at_us - now + 999) / 1000, 0);
        return;
      }
      destroy(&l);
      return;
    }
    resume_if_drained(l, d);
  }

  void resume_if_drained(Link& l, Direction& d) {
    if (d.paused && d.queued + uv_stream_get_write_queue_size(l.sink(d)) < kResumeBytes) {
      d.paused = false;
      uv_read_start(l.source(d), on_alloc, on_read);
    }
  }

  static void on_written(uv_write_t* req, int status) {
    uv_stream_t* sink = req->handle;
    auto* l = static_cast<Link*>(sink->data);
    delete reinterpret_cast<WriteRequest*>(req);
    if (!l) return;
    Loop& self = *l->proxy->loop;
    if (status < 0) {
      self.destroy(l);
      return;
    }
    self.resume_if_drained(*l, sink == l->server.stream() ? l->up : l->down);
  }

  // --- reset_peer and timeout deadlines ------------------------------------------------------

  void arm_fate(Link& l) {
    if (!l.connected) return;
    uint64_t earliest = UINT64_MAX;
    for (Stream s : {Stream::kUpstream, Stream::kDownstream}) {
      for (const auto* t : active(l, s)) {
        const bool reset = t->type == "reset_peer";
        if (!reset && !(t->type == "timeout" && t->attribute("timeout") > 0)) continue;
        earliest = std::min(earliest, l.draws[t->name].since_us + static_cast<uint64_t>(t->attribute("timeout")) * 1000);
      }
    }
    if (earliest == UINT64_MAX) {
      uv_timer_stop(l.fate.get());
      return;
    }
    const uint64_t now = now_us();
    uv_timer_start(l.fate.get(), on_fate, earliest > now ? (earliest - now + 999) / 1000 : 0, 0);
  }

  static void on_fate(uv_timer_t* t) {
    auto* l = static_cast<Link*>(t->data);
    if (!l) return;
    Loop& self = *l->proxy->loop;
    // A reset_peer due now resets; a timeout due now closes.
    const uint64_t now = now_us() + 500;
    bool reset = false, close = false;
    for (Stream s : {Stream::kUpstream, Stream::kDownstream}) {
      for (const auto* toxic : self.active(*l, s)) {
        const uint64_t due = l->draws[toxic->name].since_us + static_cast<uint64_t>(toxic->attribute("timeout")) * 1000;
        if (due > now) continue;
        if (toxic->type == "reset_peer") reset = true;
        if (toxic->type == "timeout" && toxic->attribute("timeout") > 0) close = true;
      }
    }
    if (reset || close) {
      self.destroy(l, reset);
      return;
    }
    self.arm_fate(*l);
  }

  // --- proxies -------------------------------------------------------------------------------

  void set_toxics(RelayProxy& p, std::shared_ptr<const std::vector<ToxicSpec>> toxics) {
    p.toxics = std::move(toxics);
    std::vector<Link*> links(p.links.begin(), p.links.end());
    for (Link* l : links) {
      // A toxic removed and added again is drawn again.
      for (auto it = l->draws.begin(); it != l->draws.end();) {
        bool present = std::any_of(p.toxics->begin(), p.toxics->end(), [&](const ToxicSpec& t) { return t.name == it->first; });
        it = present ? std::next(it) : l->draws.erase(it);
      }
      for (Direction* d : {&l->up, &l->down}) {
        if (d->held.empty() || find(active(*l, d->stream), "timeout")) continue;
        std::string held = std::move(d->held);
        d->held.clear();
        take(*l, *d, std::move(held));
        if (!p.links.count(l)) break;  // the data closed it (limit_data)
      }
      if (p.links.count(l)) arm_fate(*l);
    }
  }

  void close_proxy(const std::string& name) {
    auto it = proxies.find(name);
    if (it == proxies.end()) return;
    RelayProxy& p = *it->second;
    std::vector<Link*> links(p.links.begin(), p.links.end());
    for (Link* l : links) destroy(l);
    proxies.erase(it);  // the listening socket closes now (uv_close closes a TCP socket's descriptor at once)
  }
};

ToxicRelay::ToxicRelay() = default;

ToxicRelay::~ToxicRelay() { stop(); }

std::string ToxicRelay::start() {
  if (loop_) return "";
  auto loop = std::make_unique<Loop>();
  if (int rc = uv_loop_init(&loop->loop); rc != 0) return std::string("cannot start the relay loop: ") + uv_strerror(rc);
  loop->connections = &connections_;
  loop->wake.init(&loop->loop, loop.get(), uv_async_init, &Loop::on_wake);
  loop_ = std::move(loop);
  thread_ = std::thread([loop = loop_.get()] { uv_run(&loop->loop, UV_RUN_DEFAULT); });
  return "";
}

void ToxicRelay::stop() {
  if (!loop_) return;
  Loop* loop = loop_.get();
  loop->run([loop] {
    std::vector<std::string> names;
    for (const auto& [name, p] : loop->proxies) names.push_back(name);
    for (const auto& n : names) loop->close_proxy(n);
    {
      std::lock_guard lock(loop->mutex);
      loop->stopping = true;
    }
    loop->wake.close();  // the last handle: uv_run returns once it is closed
  });
  thread_.join();
  uv_loop_close(&loop->loop);
  loop_.reset();
}

ProxyHost ToxicRelay::host() {
  ProxyHost host;
  host.open = [this](const std::string& name, const std::string& listen, const std::string& upstream, std::string& bound, ApiError& error) {
    std::string why;
    auto address = config::parse_host_port(listen, &why, /*allow_port_zero=*/true);
    if (!address) {
      error = {400, "listen: " + why};
      return false;
    }
    if (address->host == "localhost") address->host = "127.0.0.1";
    auto target = config::parse_host_port(upstream, &why);
    if (!target) {
      error = {400, "upstream: " + why};
      return false;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(target->host.c_str(), std::to_string(target->port).c_str(), &hints, &found); rc != 0 || !found) {
      error = {400, "upstream: cannot resolve '" + target->host + "': " + ::gai_strerror(rc)};
      return false;
    }
    sockaddr_storage upstream_address{};
    std::memcpy(&upstream_address, found->ai_addr, std::min<size_t>(found->ai_addrlen, sizeof(upstream_address)));
    ::freeaddrinfo(found);
    net::BoundSocket socket = net::bind_tcp_socket(address->host, address->port);
    if (!socket.socket) {
      error = {socket.error.find("in use") != std::string::npos ? 409 : 400, "listen: " + socket.error};
      return false;
    }
    std::string failed;
    Loop* loop = loop_.get();
    bool ran = loop && loop->run([&] {
      auto p = std::make_unique<RelayProxy>();
      p->name = name;
      p->upstream = upstream_address;
      p->loop = loop;
      p->server.init(&loop->loop, p.get(), uv_tcp_init);
      if (int rc = uv_tcp_open(p->server.get(), socket.socket.get()); rc != 0) {
        failed = std::string("cannot listen: ") + uv_strerror(rc);
        return;
      }
      socket.socket.release();  // the handle owns it now
      if (int rc = uv_listen(p->server.stream(), 128, &Loop::on_connection); rc != 0) {
        failed = std::string("cannot listen: ") + uv_strerror(rc);
        return;
      }
      loop->proxies[name] = std::move(p);
    });
    if (!ran) {
      error = {409, "kproxy is stopping"};
      return false;
    }
    if (!failed.empty()) {
      error = {409, "listen: " + failed};
      return false;
    }
    bound = config::HostPort{address->host, socket.port}.to_string();
    return true;
  };
  host.close = [this](const std::string& name) {
    if (Loop* loop = loop_.get()) loop->run([loop, &name] { loop->close_proxy(name); });
  };
  host.on_first_connection = [this](const std::string& name, std::function<void()> callback) {
    if (Loop* loop = loop_.get()) {
      loop->run([loop, &name, &callback] {
        if (auto it = loop->proxies.find(name); it != loop->proxies.end()) {
          it->second->hold = true;
          it->second->first = std::move(callback);
        }
      });
    }
  };
  host.release = [this](const std::string& name) {
    if (Loop* loop = loop_.get()) {
      loop->run([loop, &name] {
        if (auto it = loop->proxies.find(name); it != loop->proxies.end()) loop->release(*it->second);
      });
    }
  };
  host.toxics = [this](const std::string& name, const std::vector<ToxicSpec>& toxics) {
    auto snapshot = std::make_shared<const std::vector<ToxicSpec>>(toxics);
    if (Loop* loop = loop_.get()) {
      loop->run([loop, &name, &snapshot] {
        if (auto it = loop->proxies.find(name); it != loop->proxies.end()) loop->set_toxics(*it->second, snapshot);
      });
    }
  };
  return host;
}

}  // namespace kproxy::toxiproxy
