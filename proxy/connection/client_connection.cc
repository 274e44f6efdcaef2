#include "proxy/connection/client_connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <cassert>
#include <functional>
#include <mutex>
#include <set>
#include <utility>

#include <spdlog/spdlog.h>

#include "proxy/connection/sni_route.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/net/proxy_header.h"
#include "proxy/net/self_connection.h"
#include "proxy/tls/tls_session.h"
#include "proxy/util/log_throttle.h"

namespace kproxy::connection {

struct ClientConnection::RareState {
  RareState(uv_loop_t* loop, const util::Clock& clock, std::function<void()> on_fire) : timer(loop, clock, std::move(on_fire)) {}
  net::DeadlineTimer timer;  ///< a streamed request's stall deadline (limits.request_stall_timeout)
  net::CloseReason reason;   ///< why the timer closes the connection
  uint32_t streamed_charge = 0;
  /// TLS listeners: closes a client that has not finished its handshake by limits.tls_handshake_timeout.
  std::unique_ptr<net::DeadlineTimer> tls_handshake;
};

/// The preamble state: what the client sends before kproxy knows where it goes.
struct ClientConnection::PreambleState {
  PreambleState(const ConnectionPreamble::Setup& setup, uv_loop_t* loop, const util::Clock& clock, std::function<void()> on_deadline)
      : machine(setup), deadline(loop, clock, std::move(on_deadline)) {}
  ConnectionPreamble machine;
  net::DeadlineTimer deadline;  ///< at machine.deadline()
  /// The client's TLS session, installed once the preamble is through (a PROXY header and a
  /// ClientHello are read in the clear).
  std::unique_ptr<tls::TlsSession> client_tls_pending;
  /// An SNI listener: the bootstrap server chosen at accept and the listener's upstream TLS
  /// context as of then; the route decides between the bootstrap and a broker.
  config::HostPort bootstrap;
  std::shared_ptr<const tls::TlsContext> upstream_tls;
  /// A listener without SNI connects at accept, while the PROXY header is read: it may be up
  /// before the preamble is through.
  bool upstream_connected = false;
};

/// The draining state: why the connection closes once every request is answered, and, when the
/// client half-closed, the deadline for those answers (limits.unanswered_request_timeout).
struct ClientConnection::DrainState {
  explicit DrainState(net::CloseReason r) : reason(std::move(r)) {}
  net::CloseReason reason;
  std::unique_ptr<net::DeadlineTimer> unanswered;
  net::CloseReason unanswered_reason;
};

ClientConnection::ClientConnection(ConnectionEnvironment& env, std::shared_ptr<const ListenerSpec> listener,
                                   std::shared_ptr<const config::Config> config, uint64_t id)
    : env_(env), listener_(std::move(listener)), config_(std::move(config)), id_(id), client_(env.loop(), *this, "client"),
      upstream_(env.loop(), *this, *this, env.services().self_connections),
      requests_(config_->limits.max_request_frame_bytes, &env.frame_budget()),
      responses_(config_->limits.max_response_frame_bytes, &env.frame_budget()), state_(Connecting{}),
      pipeline_(env.loop(), env.live_rules(), env.rewrite(listener_->listener_index),
                stage::ConnectionInfo{id, listener_->name, listener_->listener_index, nullptr, {}}, *this, metrics_, env.services()) {}

ClientConnection::~ClientConnection() {
  env_.read_pressure().forget(*this);
  release_streamed_charge();
  env_.release_connection_slot();
}

void ClientConnection::enter(State next) {
  static_assert(std::variant_size_v<State> == static_cast<size_t>(ConnectionState::kClosed) + 1,
                "one alternative per ConnectionState, in its order");
  auto to = static_cast<ConnectionState>(next.index());
  assert(can_transition(state(), to));
  spdlog::trace("conn={} {} -> {}", id_, state_name(state()), state_name(to));
  state_ = std::move(next);  // the state left takes its data (reader, deadline, held bytes) with it
}

std::string_view ClientConnection::preamble_phase() const {
  const auto* p = std::get_if<Preamble>(&state_);
  return p ? p->data->machine.phase_name() : std::string_view();
}

void ClientConnection::start(const config::HostPort& upstream) {
  opened_at_ = clock_now();
  peer() = client_.peer_address();
  client_.set_connected();
  metrics_.opened();
  uv_tcp_nodelay(client_.handle(), 1);
  spdlog::info("conn={} accepted from {} on {} port {}, upstream {}", id_, peer(), listener_->label(), listener_->port,
               upstream.to_string());
  // TLS contexts as of now: a reload with renewed certificates applies to later connections.
  // The upstream session verifies the broker's certificate against the host it is reached by:
  // the bootstrap host, or the host the broker advertises.
  tls::ListenerTls tls = env_.listener_tls(listener_->listener_index);
  // A listener added at run time has no sni: (proxy/runtime/proxy.h add_listener).
  static const std::optional<config::SniConfig> kNoSni;
  const auto& sni = listener_->listener_index < config_->listeners.size() ? config_->listeners[listener_->listener_index].sni : kNoSni;
  ConnectionPreamble::Setup setup{listener_->proxy_protocol, sni ? &*sni : nullptr, tls.clients != nullptr, opened_at_,
                                  config_->limits.proxy_header_timeout};
  if (ConnectionPreamble::needed(setup)) {
    // Nothing of the client's is forwarded before the load balancer's PROXY header (config/README.md
    // "PROXY protocol") and, on an SNI listener, before the ClientHello or the header's authority
    // says where it goes (config/README.md "SNI listeners").
    auto p = std::make_unique<PreambleState>(setup, env_.loop(), env_.services().clock, [this] {
      if (auto* pre = std::get_if<Preamble>(&state_)) on_preamble_step(pre->data->machine.on_deadline());
    });
    p->bootstrap = upstream;
    p->upstream_tls = tls.upstream;
    p->deadline.arm(p->machine.deadline());
    state_ = Preamble{std::move(p)};
  }
  track_request_deadline(opened_at_);  // limits.first_request_timeout
  if (tls.clients) {
    auto session = std::make_unique<tls::TlsSession>(*tls.clients, "");
    if (auto* pre = std::get_if<Preamble>(&state_)) pre->data->client_tls_pending = std::move(session);
    else client_.use_tls(std::move(session));
    RareState& r = rare_state();
    r.tls_handshake = std::make_unique<net::DeadlineTimer>(env_.loop(), env_.services().clock, [this] {
      on_stream_tls_failed(client_, "handshake not finished within " + std::to_string(config_->limits.tls_handshake_timeout.count()) +
                                        " ms (limits.tls_handshake_timeout)");
    });
    r.tls_handshake->arm(opened_at_ + config_->limits.tls_handshake_timeout);
  }
  if (tls.upstream && !sni) upstream_.stream().use_tls(std::make_unique<tls::TlsSession>(*tls.upstream, upstream.host));
  if (net::ConnectionKey key = connection_key(client_.handle(), /*accepted=*/true); !key.empty()) {
    if (env_.services().self_connections.accepted(key)) {
      refuse_self_connection("connection from " + peer() + ", which is one of kproxy's own upstream sockets");
      return;
    }
    client_endpoint_ = key;
  }
  client_.start_reading();
  if (!sni) upstream_.connect(upstream, config_->limits.connect_timeout);
}

net::ConnectionKey ClientConnection::connection_key(uv_tcp_t* socket, bool accepted) {
  sockaddr_storage local{}, peer{};
  int local_len = sizeof(local), peer_len = sizeof(peer);
  if (uv_tcp_getsockname(socket, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      uv_tcp_getpeername(socket, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return {};
  }
  // Keyed in the direction of the connection: peer -> kproxy for an accepted one, kproxy ->
  // broker for an upstream one, so a connection kproxy made to itself has one key from both ends.
  return accepted ? net::SelfConnectionDetector::connection_key(peer, local) : net::SelfConnectionDetector::connection_key(local, peer);
}

void ClientConnection::refuse_self_connection(std::string detail) {
  metrics_.count(metrics::ProxyEvent::kSelfConnection);
  // The first looping connection of each port (a broker node's, or the bootstrap's) is named in
  // an error line of its own, whatever else was logged lately (issue #46: 89 looping connections
  // once wrote 188 lines, none naming the loop); after it, a misconfigured cluster makes every
  // client attempt hit this: one error line per 10 s.
  static std::mutex named_mutex;
  static std::set<std::pair<size_t, int32_t>> named;
  bool first;
  {
    std::lock_guard lock(named_mutex);
    first = named.emplace(listener_->listener_index, listener_->node_id).second;
  }
  if (first) {
    spdlog::error(
        "listener={} kproxy is connecting to itself (a loop, the first on this port): {} ({}; check the brokers' advertised.listeners: "
        "they must name the brokers, not the proxy){}",
        listener_->label(), detail,
        listener_->is_broker_port() ? "broker node " + std::to_string(listener_->node_id) + " is advertised at an address of kproxy's"
                                    : "the listener's upstream is kproxy",
        "; this port's later looping connections are logged at most once per 10 s");
  }
  static util::LogThrottle throttle(std::chrono::seconds(10));
  uint64_t suppressed = 0;
  if (!first && throttle.allow(&suppressed)) {
    spdlog::error(
        "listener={} kproxy is connecting to itself ({}): a broker advertises an address of kproxy's (check the brokers' "
        "advertised.listeners: they must name the brokers, not the proxy), or the listener's upstream is kproxy{}",
        listener_->label(), detail, util::LogThrottle::suppressed_note(suppressed));
  }
  close({net::CloseCategory::kSelfConnection, "kproxy connected to itself: " + detail});
}

void ClientConnection::begin_close(const net::CloseReason& reason, const char* how) {
  enter(Closing{});
  env_.read_pressure().forget(*this);
  request_timer_.reset();
  env_.services().self_connections.accepted_closed(client_endpoint_);
  env_.services().self_connections.upstream_closed(upstream_endpoint_);
  if (rare_ && rare_->tls_handshake) rare_->tls_handshake->cancel();
  auto lived = std::chrono::duration_cast<std::chrono::milliseconds>(clock_now() - opened_at_);
  spdlog::info("conn={} {}: {} [{}] (client {}, {} requests, {} awaiting the broker, {} bytes in, {} bytes out, open {} ms)", id_, how,
               reason.detail, net::close_label(reason.category), peer(), requests_in_, pipeline_.awaiting_broker(), metrics_.bytes_in(),
               metrics_.bytes_out(), lived.count());
  metrics_.closed(reason.category);
}

void ClientConnection::close(net::CloseReason reason) {
  if (closing()) return;
  begin_close(reason, "closed");
  pipeline_.shutdown();
  client_.close();
  upstream_.close(/*flush_first=*/false);
}

void ClientConnection::finish(net::CloseReason reason) {
  if (closing()) return;
  begin_close(reason, "closing after queued responses");
  pipeline_.shutdown();
  upstream_.close(/*flush_first=*/true);
  client_.shutdown_and_close();
}

void ClientConnection::drain() {
  begin_drain({net::CloseCategory::kShutdown, requests_in_ == 0 ? "kproxy is shutting down (nothing in flight)"
                                                                : "kproxy is shutting down (in-flight requests answered)"});
}

void ClientConnection::begin_drain(net::CloseReason reason) {
  if (closing() || in(ConnectionState::kDraining)) return;
  enter(Draining{std::make_unique<DrainState>(std::move(reason))});
  client_.stop_reading();
  finish_drain_if_idle();
}

void ClientConnection::finish_drain_if_idle() {
  auto* d = std::get_if<Draining>(&state_);
  if (!d || !pipeline_.idle()) return;
  finish(std::move(d->data->reason));
}

void ClientConnection::on_preamble_step(PreambleStep step) {
  auto& pre = *std::get<Preamble>(state_).data;
  if (step.proxy_header) {
    const net::ProxyHeader& h = *step.proxy_header;
    if (!h.local && !h.source.empty()) {
      spdlog::info("conn={} client {} through {} (PROXY protocol v2{})", id_, h.source, peer(),
                   h.authority ? ", authority " + *h.authority : std::string());
      peer() = h.source;  // logs and the tap name the client, not the load balancer
    }
  }
  switch (step.kind) {
    case PreambleStep::Kind::kNeedMore:
      // The PROXY header may be through and the ClientHello next: its own deadline.
      if (auto at = pre.machine.deadline(); at != ConnectionPreamble::time_point::max()) pre.deadline.arm(at);
      return;
    case PreambleStep::Kind::kRefuse: {
      if (step.proxy_header_refused) {
        // A header refused or not in time (kproxy_proxy_proxy_header_refusals_total, config/README.md).
        metrics_.count(metrics::ProxyEvent::kProxyHeaderRefused);
        static util::LogThrottle throttle(std::chrono::seconds(10));
        uint64_t suppressed = 0;
        if (throttle.allow(&suppressed)) {
          spdlog::warn(
              "listener={} conn={} from {}: {} (listeners[].proxy_protocol is v2: every connection must come through the load "
              "balancer){}",
              listener_->label(), id_, peer(), step.reason.detail, util::LogThrottle::suppressed_note(suppressed));
        }
      }
      close(std::move(step.reason));
      return;
    }
    case PreambleStep::Kind::kForward: {
      std::vector<uint8_t> first = std::move(step.bytes);
      std::unique_ptr<tls::TlsSession> session = std::move(pre.client_tls_pending);
      leave_preamble();
      if (session) client_.use_tls(std::move(session));
      client_.replay(first);
      return;
    }
    case PreambleStep::Kind::kRoute: route_to(std::move(step)); return;
  }
}

void ClientConnection::leave_preamble() {
  bool up = std::get<Preamble>(state_).data->upstream_connected;
  if (up) enter(Forwarding{});
  else enter(Connecting{});
}

void ClientConnection::brokers_discovered() {
  auto* pre = std::get_if<Preamble>(&state_);
  if (!pre) return;
  if (!memory_paused_) client_.start_reading();
  route_to(pre->data->machine.brokers_discovered());
}

void ClientConnection::route_to(PreambleStep step) {
  PreambleState& pre = *std::get<Preamble>(state_).data;
  pre.deadline.cancel();
  SniRoute& route = step.route;
  const config::SniConfig& sni = *config_->listeners[listener_->listener_index].sni;
  config::HostPort target = pre.bootstrap;
  std::optional<config::HostPort> broker;
  if (route.outcome == SniOutcome::kBroker) {
    broker = env_.broker_address(listener_->listener_index, route.node_id);
    if (broker) {
      target = *broker;
    } else if (!pre.machine.asked_brokers()) {
      // Served at the bootstrap, a client would be on the wrong broker (KIP-1242: a Kafka 4.4
      // client checks and rebootstraps): ask the bootstrap for the brokers first, client unread.
      pre.machine.await_brokers(std::move(step));
      client_.stop_reading();
      env_.discover_brokers(listener_->listener_index, pre.bootstrap, pre.upstream_tls, config_->limits.connect_timeout, this);
      return;
    } else {
      route.outcome = SniOutcome::kUnknownNode;
    }
  }
  sni_outcome_counter(env_.services().metrics).add(static_cast<size_t>(route.outcome));
  if (route.outcome == SniOutcome::kBootstrap || route.outcome == SniOutcome::kBroker) {
    spdlog::debug("conn={} {}: {} at {}", id_, step.name, broker ? "broker node " + std::to_string(route.node_id) : "bootstrap",
                  target.to_string());
  }
  std::string what;
  switch (route.outcome) {
    case SniOutcome::kBootstrap:
    case SniOutcome::kBroker: break;
    case SniOutcome::kUnknownNode:
      what = "names broker node " + std::to_string(route.node_id) +
             ", which neither a response nor the bootstrap's broker list named: served as the bootstrap";
      break;
    case SniOutcome::kUnknownNameRefused: what = "matches no configured name: refused (sni.unknown: refuse)"; break;
    case SniOutcome::kUnknownNameBootstrap: what = "matches no configured name: served as the bootstrap (sni.unknown: bootstrap)"; break;
    case SniOutcome::kNoNameRefused:
      what = "is no host name (a client connecting by IP address sends none, RFC 6066): refused (sni.unknown: refuse)";
      break;
    case SniOutcome::kNoNameBootstrap:
      what = "is no host name (a client connecting by IP address sends none, RFC 6066): served as the bootstrap (sni.unknown: bootstrap)";
      break;
    case SniOutcome::kTimeout:
      what = "not whole within " + std::to_string(sni.client_hello_timeout.count()) + " ms (sni.client_hello_timeout)";
      break;
    default: what = "cannot be read: " + step.error; break;
  }
  std::string decision = step.name + " " + what + "; configured: " + configured_names(sni) + " [" + sni_outcome_name(route.outcome) + "]";
  if (!what.empty()) {
    // The decision an operator looks for when a client went nowhere: the name received and the
    // names configured, side by side (one line per second per kind of decision at most).
    constexpr auto kEvery = std::chrono::seconds(1);
    static util::LogThrottle throttles[static_cast<size_t>(SniOutcome::kCount)] = {
        util::LogThrottle(kEvery), util::LogThrottle(kEvery), util::LogThrottle(kEvery), util::LogThrottle(kEvery),
        util::LogThrottle(kEvery), util::LogThrottle(kEvery), util::LogThrottle(kEvery), util::LogThrottle(kEvery),
        util::LogThrottle(kEvery), util::LogThrottle(kEvery), util::LogThrottle(kEvery)};
    static_assert(static_cast<size_t>(SniOutcome::kCount) == 11, "one throttle per outcome");
    uint64_t suppressed = 0;
    if (throttles[static_cast<size_t>(route.outcome)].allow(&suppressed)) {
      spdlog::warn("listener={} conn={} from {}: {}{}", listener_->label(), id_, peer(), decision,
                   util::LogThrottle::suppressed_note(suppressed));
    }
  }
  if (!route.serve()) {
    if (route.refuse() && pre.client_tls_pending) {  // a TLS client hears why; without TLS here, a close
      client_.append(codec::Bytes(kUnrecognizedNameAlert, sizeof(kUnrecognizedNameAlert)));
      finish({net::CloseCategory::kClientProtocolError, "refused with TLS alert unrecognized_name: " + decision});
    } else {
      close({net::CloseCategory::kClientProtocolError, decision});
    }
    return;
  }
  std::unique_ptr<tls::TlsSession> session = std::move(pre.client_tls_pending);
  std::shared_ptr<const tls::TlsContext> upstream_tls = pre.upstream_tls;
  leave_preamble();  // the preamble's data goes here: what is still needed was taken above
  if (session) client_.use_tls(std::move(session));
  // The SNI kproxy sends the broker is the host it connects to, as on any TLS listener.
  if (upstream_tls) upstream_.stream().use_tls(std::make_unique<tls::TlsSession>(*upstream_tls, target.host));
  upstream_.connect(target, config_->limits.connect_timeout);
  if (closing()) return;
  client_.replay(step.bytes);
}

void ClientConnection::on_stream_read(net::TcpStream& s, codec::Bytes data) {
  if (closing()) return;
  if (auto* pre = std::get_if<Preamble>(&state_); pre && &s == &client_ && pre->data->machine.reading()) {
    on_preamble_step(pre->data->machine.feed(data));
    return;
  }
  // Views into `data` queued with append_borrowed must be written or copied before it is reused;
  // then a reader's read-through buffer may move its unfinished frame to the front.
  struct EndOfRead {
    ClientConnection& c;
    ~EndOfRead() {
      assert(!c.client_.holds_borrowed() && !c.upstream_.stream().holds_borrowed());
      c.requests_.end_read();
      c.responses_.end_read();
    }
  } end_of_read{*this};
  if (&s == &client_) {
    metrics_.bytes_in(data.size());
    // Views into the loop's read buffer or a read-through buffer may be borrowed; bytes read in
    // place into a frame's own buffer may not (it goes when its frame is out, unless moved on).
    read_piece_ = requests_.read_piece(data);
    // One clock reading for every frame of the read: they all arrived at once.
    auto now = clock_now();
    metrics_.residence_begin(metrics::Direction::kRequest);
    bool ok = requests_.feed(data, [this, now](codec::Bytes frame) {
      ++requests_in_;
      stream_refused_ = false;
      return pipeline_.on_request_frame(frame, now, requests_.streamed() > 0);
    });
    read_piece_ = {};
    if (closing()) return;
    if (!ok) {
      if (requests_.over_budget()) {
        close_over_frame_budget(requests_, "request");
        return;
      }
      if (requests_.looks_like_tls()) metrics_.count(metrics::ProxyEvent::kTlsOnPlaintext);
      else metrics_.count(metrics::ProxyEvent::kFramingError);
      close({net::CloseCategory::kClientProtocolError, "bad request framing: " + requests_.error()});
      return;
    }
    track_request_deadline(now);
    env_.read_pressure().after_read(*this);
    if (closing()) return;
    stream_large_request();
    // Frames of `data` queued as views are written (or copied) here, before `data` is reused.
    if (!upstream_.stream().flush()) return;
    if (metrics_.residence_pending(metrics::Direction::kRequest))
      metrics_.residence_written(metrics::Direction::kRequest, now, clock_now());
    if (!client_.flush()) return;  // answers kproxy gave itself (fault rules, ApiVersions)
    pipeline_.release_idle_memory();
    apply_backpressure(client_, upstream_.stream());
  } else {
    metrics_.bytes_out(data.size());
    read_piece_ = responses_.read_piece(data);
    auto now = clock_now();
    metrics_.residence_begin(metrics::Direction::kResponse);
    bool ok = responses_.feed(data, [this, now](codec::Bytes frame) { return pipeline_.on_response_frame(frame, now); });
    read_piece_ = {};
    if (closing()) return;
    if (!ok) {
      if (responses_.over_budget()) {
        close_over_frame_budget(responses_, "response");
        return;
      }
      metrics_.count(metrics::ProxyEvent::kFramingError);
      // The first bytes a TLS listener sends a plaintext client are a TLS record (an alert,
      // content type 21, or a handshake, 22; RFC 8446 5.1), read as a size of ~350 MB.
      bool first_bytes = metrics_.bytes_out() == data.size();
      if (first_bytes && data.size() >= 2 && (data[0] == 0x15 || data[0] == 0x16) && data[1] == 0x03) {
        close(
            {net::CloseCategory::kBrokerProtocolError, "protocol mismatch: broker " + upstream_peer() +
                                                           " answered with TLS (a TLS listener? set upstream_tls): " + responses_.error()});
        return;
      }
      close({net::CloseCategory::kBrokerProtocolError, "bad response framing from broker: " + responses_.error()});
      return;
    }
    if (!client_.flush()) return;
    if (metrics_.residence_pending(metrics::Direction::kResponse))
      metrics_.residence_written(metrics::Direction::kResponse, now, clock_now());
    finish_drain_if_idle();
    if (closing()) return;
    pipeline_.release_idle_memory();  // nothing in flight: an idle connection holds no queue
    apply_backpressure(upstream_.stream(), client_);
  }
}

void ClientConnection::stream_large_request() {
  if (requests_.partial_frame_size() < kStreamedRequestMin || !in(ConnectionState::kForwarding) || !upstream_.stream().connected()) {
    return;
  }
  if (requests_.streamed() == 0) {
    // A connection that has had no answer yet may be a first packet with a forged size: the
    // broker would allocate the announced size for it (issue #30).
    if (!answered_) return;
    if (!pipeline_.may_stream_request(requests_.partial_frame())) return;  // asked again after the next read
    auto announced = static_cast<uint32_t>(requests_.partial_frame_size());
    if (!env_.streamed_budget().charge(announced)) {
      // Gathered here instead, under max_buffered_frame_bytes (tried again on the next read).
      if (!stream_refused_) metrics_.count(metrics::ProxyEvent::kRequestStreamRefused);
      stream_refused_ = true;
      return;
    }
    metrics_.count(metrics::ProxyEvent::kRequestStreamed);
    rare_state().streamed_charge = announced;
  }
  // Its bytes must keep coming: the broker holds the announced size until the last one.
  arm_wait_deadline(
      clock_now() + config_->limits.request_stall_timeout,
      {net::CloseCategory::kLimit,
       "a " + std::to_string(requests_.partial_frame_size()) + "-byte request forwarded while it arrived stalled: no byte for " +
           std::to_string(config_->limits.request_stall_timeout.count()) + " ms (limits.request_stall_timeout)"});
  // A view into the reader's buffer: flushed (or copied, when the socket is backed up) before
  // the next read can move it.
  upstream_.stream().append_borrowed(requests_.take_unstreamed());
}

void ClientConnection::track_request_deadline(std::chrono::steady_clock::time_point now) {
  if (requests_.buffered() == 0) {
    partial_since_ms_ = kNoPartial;
  } else if (partial_since_ms_ == kNoPartial || static_cast<uint32_t>(requests_.frames()) != partial_frame_index_) {
    // A new frame began in this read.
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - opened_at_).count();
    partial_since_ms_ = static_cast<uint32_t>(std::clamp<int64_t>(ms, 0, kNoPartial - 1));
    partial_frame_index_ = static_cast<uint32_t>(requests_.frames());
  }
  bool first = false;
  auto at = next_request_deadline(&first);
  if (at == std::chrono::steady_clock::time_point::max()) return;
  // A timer armed for an earlier deadline stays: when it fires it finds the next one and re-arms.
  if (uv_timer_t* t = request_timer_.get(); t && request_timer_.open() && uv_is_active(reinterpret_cast<uv_handle_t*>(t))) {
    auto due = now + std::chrono::milliseconds(uv_timer_get_due_in(t));
    if (due <= at + std::chrono::milliseconds(1)) return;
  }
  arm_request_timer(at);
}

void ClientConnection::arm_request_timer(std::chrono::steady_clock::time_point at) {
  if (!request_timer_.open()) {
    request_timer_.reset();
    request_timer_.init(env_.loop(), this, uv_timer_init);
  }
  uv_update_time(env_.loop());
  uv_timer_start(request_timer_.get(), on_request_timer, net::loop_wait_ms(at - clock_now()), 0);
}

void ClientConnection::on_request_timer(uv_timer_t* timer) {
  if (auto* self = static_cast<ClientConnection*>(timer->data)) self->on_request_deadline();
}

std::chrono::steady_clock::time_point ClientConnection::next_request_deadline(bool* first_request) const {
  auto at = std::chrono::steady_clock::time_point::max();
  *first_request = false;
  if (requests_in_ == 0) {
    at = opened_at_ + config_->limits.first_request_timeout;
    *first_request = true;
  }
  if (partial_since_ms_ != kNoPartial) {
    auto completion = opened_at_ + std::chrono::milliseconds(partial_since_ms_) + config_->limits.request_completion_timeout;
    if (completion < at) {
      at = completion;
      *first_request = false;
    }
  }
  return at;
}

void ClientConnection::on_request_deadline() {
  if (closing() || in(ConnectionState::kDraining)) return;  // a drain has its own deadline
  bool first = false;
  auto at = next_request_deadline(&first);
  if (at == std::chrono::steady_clock::time_point::max()) {
    request_timer_.reset();  // nothing due: the handle goes back until a frame stays partial
    return;
  }
  if (at > clock_now()) {
    arm_request_timer(at);
    return;
  }
  static util::LogThrottle first_throttle(std::chrono::seconds(10));
  static util::LogThrottle completion_throttle(std::chrono::seconds(10));
  uint64_t suppressed = 0;
  std::string detail;
  if (first) {
    metrics_.count(metrics::ProxyEvent::kFirstRequestDeadline);
    detail = "no request within " + std::to_string(config_->limits.first_request_timeout.count()) +
             " ms of the accept (limits.first_request_timeout): " + std::to_string(metrics_.bytes_in()) + " bytes received";
    if (first_throttle.allow(&suppressed))
      spdlog::warn("listener={} conn={} from {}: closed: {}{}", listener_->label(), id_, peer(), detail,
                   util::LogThrottle::suppressed_note(suppressed));
    close({net::CloseCategory::kFirstRequestTimeout, std::move(detail)});
    return;
  }
  metrics_.count(metrics::ProxyEvent::kRequestCompletionDeadline);
  detail = "no whole request within " + std::to_string(config_->limits.request_completion_timeout.count()) +
           " ms (limits.request_completion_timeout): " + std::to_string(requests_.buffered()) + " bytes of a " +
           (requests_.partial_frame_size() ? std::to_string(requests_.partial_frame_size()) + "-byte" : std::string("still unsized")) +
           " request frame arrived" + (memory_paused_ ? " (reads paused for memory)" : "");
  if (completion_throttle.allow(&suppressed))
    spdlog::warn("listener={} conn={} from {}: closed: {}{}", listener_->label(), id_, peer(), detail,
                 util::LogThrottle::suppressed_note(suppressed));
  close({net::CloseCategory::kRequestTimeout, std::move(detail)});
}

void ClientConnection::pause_reads(const std::string& why) {
  memory_paused_ = true;
  client_.stop_reading();
  static util::LogThrottle throttle(std::chrono::seconds(10));
  uint64_t suppressed = 0;
  if (throttle.allow(&suppressed)) {
    spdlog::warn("listener={} conn={} from {}: reads paused: {}{}", listener_->label(), id_, peer(), why,
                 util::LogThrottle::suppressed_note(suppressed));
  } else {
    spdlog::debug("conn={} reads paused: {}", id_, why);
  }
}

void ClientConnection::resume_reads() {
  memory_paused_ = false;
  if (closing()) return;
  spdlog::debug("conn={} reads resumed: partial frames hold {} bytes", id_, env_.frame_budget().used());
  apply_backpressure(client_, upstream_.stream());
}

void ClientConnection::release_streamed_charge() {
  if (!rare_ || rare_->streamed_charge == 0) return;
  env_.streamed_budget().refund(rare_->streamed_charge);
  rare_->streamed_charge = 0;
}

ClientConnection::RareState& ClientConnection::rare_state() {
  if (!rare_) {
    rare_ = std::make_unique<RareState>(env_.loop(), env_.services().clock, [this] {
      if (closing()) return;
      metrics_.count(metrics::ProxyEvent::kWaitDeadline);
      close(std::move(rare_->reason));
    });
  }
  return *rare_;
}

void ClientConnection::arm_wait_deadline(std::chrono::steady_clock::time_point at, net::CloseReason reason) {
  rare_state().reason = std::move(reason);
  rare_->timer.arm(at);
}

void ClientConnection::close_over_frame_budget(const codec::FrameReader& reader, const char* what) {
  metrics_.count(metrics::ProxyEvent::kFrameMemoryRefusal);
  close({net::CloseCategory::kLimit, std::string(what) + " refused: " + reader.error()});
}

std::span<uint8_t> ClientConnection::read_space(net::TcpStream& s) {
  if (closing()) return {};
  return &s == &client_ ? requests_.read_space() : responses_.read_space();
}

void ClientConnection::pass_on(net::TcpStream& to, codec::Bytes bytes, codec::FrameReader& reader, codec::Bytes piece) {
  if (reader.holds(bytes)) {
    size_t streamed = reader.streamed();  // the start of a streamed request is at the broker already
    to.append(reader.take_frame(), streamed);
  } else if (!piece.empty() && bytes.data() >= piece.data() && bytes.data() + bytes.size() <= piece.data() + piece.size()) {
    to.append_borrowed(bytes);
  } else {
    to.append(bytes);
  }
}

// ---- PipelineOutput ----

void ClientConnection::send_to_broker(codec::Bytes bytes) {
  bool rest_of_streamed = requests_.holds(bytes) && requests_.streamed() != 0;
  pass_on(upstream_.stream(), bytes, requests_, read_piece_);
  if (rest_of_streamed) {  // the broker has all of it now
    release_streamed_charge();
    if (rare_ && in(ConnectionState::kForwarding)) rare_->timer.cancel();
  }
}

void ClientConnection::send_to_client(codec::Bytes bytes) {
  answered_ = true;
  pass_on(client_, bytes, responses_, read_piece_);
}

void ClientConnection::flush() {
  if (closing()) return;
  if (!upstream_.stream().flush() || !client_.flush() || closing()) return;
  finish_drain_if_idle();
  if (closing()) return;
  // A shaper released bytes (or a held request went out): re-check both ways.
  apply_backpressure(client_, upstream_.stream());
  apply_backpressure(upstream_.stream(), client_);
}

void ClientConnection::reset_client() {
  // SO_LINGER 0: close() sends RST (a reset_after_bytes fault rule).
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(client_.handle()), &fd) == 0) {
    struct linger l {
      1, 0
    };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  }
}

void ClientConnection::open_broker_port(int32_t node_id, uint16_t port) { env_.open_broker_port(listener_->listener_index, node_id, port); }

// ---- transport events ----

void ClientConnection::apply_backpressure(net::TcpStream& from, net::TcpStream& to) {
  size_t held = &to == &client_ ? pipeline_.held_bytes_to_client() : pipeline_.held_bytes_to_broker();
  if (to.queued_bytes() + held > net::kWriteQueueHighWater) {
    if (&from == &client_ && from.reading()) env_.read_pressure().count_write_queue_pause();
    from.stop_reading();
  } else if (!from.reading() && held < net::kWriteQueueLowWater &&
             !(&from == &client_ && (memory_paused_ || in(ConnectionState::kDraining))) &&
             (&from == &client_ || upstream_.stream().connected())) {
    from.start_reading();
  }
}

void ClientConnection::on_stream_error(net::TcpStream& s, int status, const char* during) {
  if (closing()) {
    s.close();
    return;
  }
  if (&s == &client_) {
    if (status == UV_EOF && requests_.streamed() != 0) {
      close({net::CloseCategory::kClientClosed, "client closed the connection in the middle of a " +
                                                    std::to_string(requests_.partial_frame_size()) +
                                                    "-byte request forwarded while it arrived"});
      return;
    }
    if (status == UV_EOF && !pipeline_.idle()) {
      // A half-close (shutdown(SHUT_WR)) after the last request: the client still reads. A
      // broker answers every request it received before it closes, and so does kproxy, for
      // as long as limits.unanswered_request_timeout: a broker that went silent (a long pause,
      // a partition without RST) never holds the connection for good.
      auto wait = config_->limits.unanswered_request_timeout;
      net::CloseReason late{net::CloseCategory::kUnanswered, "client closed its side after " + std::to_string(requests_in_) +
                                                                 " requests; the broker " + upstream_peer() + " left " +
                                                                 std::to_string(pipeline_.in_flight()) + " of them unanswered for " +
                                                                 std::to_string(wait.count()) + " ms (limits.unanswered_request_timeout)"};
      begin_drain({net::CloseCategory::kClientClosed,
                   "client closed its side after " + std::to_string(requests_in_) + " requests; every request was answered"});
      if (auto* d = std::get_if<Draining>(&state_)) {  // the drain's own deadline for the answers
        DrainState& drain = *d->data;
        drain.unanswered_reason = std::move(late);
        drain.unanswered = std::make_unique<net::DeadlineTimer>(env_.loop(), env_.services().clock, [this] {
          auto* dr = std::get_if<Draining>(&state_);
          if (!dr) return;
          metrics_.count(metrics::ProxyEvent::kWaitDeadline);
          close(std::move(dr->data->unanswered_reason));
        });
        drain.unanswered->arm(clock_now() + wait);
      }
      return;
    }
    if (status == UV_EOF) close({net::CloseCategory::kClientClosed, "client closed the connection"});
    else close({net::CloseCategory::kClientClosed, std::string("client ") + during + " failed: " + uv_strerror(status)});
    return;
  }
  metrics_.count(metrics::ProxyEvent::kUpstreamDisconnect);
  std::string reason = status == UV_EOF ? "broker " + upstream_.target().to_string() + " closed the connection"
                                        : "broker " + upstream_.target().to_string() + " " + during + " failed: " + uv_strerror(status);
  if (pipeline_.awaiting_broker() > 0) reason += " with " + std::to_string(pipeline_.awaiting_broker()) + " requests in flight";
  // The client gets the responses already received, then sees the disconnect: nothing in flight
  // is silently lost.
  finish({net::CloseCategory::kBrokerClosed, std::move(reason)});
}

void ClientConnection::on_stream_writable(net::TcpStream& s) {
  if (closing()) return;
  if (&s == &client_) apply_backpressure(upstream_.stream(), client_);
  else apply_backpressure(client_, upstream_.stream());
}

void ClientConnection::on_stream_closed(net::TcpStream&) { maybe_destroy(); }

std::string ClientConnection::upstream_peer() {
  std::string resolved = upstream_.stream().peer_address();
  std::string target = upstream_.target().to_string();
  return resolved.empty() || resolved == target ? target : target + " (" + resolved + ")";
}

void ClientConnection::on_stream_tls_failed(net::TcpStream& s, const std::string& reason) {
  if (closing()) {
    s.close();
    return;
  }
  metrics_.count(metrics::ProxyEvent::kTlsFailure);
  if (&s == &client_) {
    close({net::CloseCategory::kTls, "TLS with client " + peer() + " failed: " + reason});
    return;
  }
  metrics_.count(metrics::ProxyEvent::kUpstreamConnectFailure);
  close({net::CloseCategory::kUpstreamConnectFailed, "TLS with broker " + upstream_peer() + " failed: " + reason});
}

void ClientConnection::on_stream_tls_established(net::TcpStream& s) {
  bool client = &s == &client_;
  if (client && rare_ && rare_->tls_handshake) rare_->tls_handshake->cancel();
  else upstream_.handshake_done();
  env_.tls_handshake_done();
  std::string sni = s.tls()->requested_server_name();
  spdlog::debug("conn={} TLS with {}: {}{}", id_, client ? "client " + peer() : "broker " + upstream_peer(), s.tls()->protocol_and_cipher(),
                sni.empty() ? "" : ", SNI " + sni);
}

void ClientConnection::on_upstream_connected() {
  if (closing()) return;
  spdlog::debug("conn={} connected to {}", id_, upstream_.target().to_string());
  if (net::ConnectionKey key = connection_key(upstream_.stream().handle(), /*accepted=*/false); !key.empty()) {
    if (env_.services().self_connections.connected(key)) {
      refuse_self_connection("upstream " + upstream_peer() + " is one of kproxy's own listening ports");
      return;
    }
    upstream_endpoint_ = key;
  }
  if (auto* pre = std::get_if<Preamble>(&state_)) pre->data->upstream_connected = true;  // forwarding once the preamble is through
  else if (in(ConnectionState::kConnecting)) enter(Forwarding{});
  metrics_.upstream_connected();
  if (!upstream_.stream().flush()) return;
  upstream_.stream().start_reading();
  apply_backpressure(client_, upstream_.stream());
}

void ClientConnection::on_upstream_connect_failed(const std::string& reason) {
  metrics_.count(metrics::ProxyEvent::kUpstreamConnectFailure);
  if (!listener_->is_broker_port()) env_.bootstrap_unreachable(listener_->listener_index, upstream_.target());
  close({net::CloseCategory::kUpstreamConnectFailed, "upstream unavailable: " + reason});
}

void ClientConnection::on_upstream_is_self(const std::string& detail) {
  if (closing()) return;
  refuse_self_connection(detail);
}

void ClientConnection::on_upstream_part_released() { maybe_destroy(); }

void ClientConnection::maybe_destroy() {
  if (in(ConnectionState::kClosed) || !client_.closed() || !upstream_.released()) return;
  enter(Closed{});
  env_.forget(this);
  delete this;
}

}  // namespace kproxy::connection
