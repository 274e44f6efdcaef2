// ClientConnection: one client's connection and the upstream connection made for it, on one loop.
// It owns the transport: both sockets, framing, backpressure, and the connection's state
// (proxy/connection/connection_state.h). What happens to each frame is the pipeline's business
// (proxy/pipeline/pipeline.h): the connection hands it every whole frame and sends what the pipeline gives
// back through PipelineOutput.
//
//   client ─► TcpStream ─► FrameReader ─► Pipeline::on_request_frame ──► send_to_broker ─► upstream TcpStream
//   client ◄─ TcpStream ◄─ send_to_client ◄── Pipeline::on_response_frame ◄─ FrameReader ◄─ upstream TcpStream
//
// Every request is forwarded as its original bytes, without a copy in user space: a large frame
// is read straight into its own buffer, which then moves to the upstream write queue; frames
// inside one read are written from the read buffer itself (TcpStream::append_borrowed).
// Backpressure: reading one side stops while the other side's write queue is above the
// high-water mark. Every log line carries "conn=<id>"; every close logs its reason.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "codec/frame_reader.h"
#include "config/config.h"
#include "proxy/connection/connection_environment.h"
#include "proxy/connection/connection_preamble.h"
#include "proxy/connection/connection_state.h"
#include "proxy/connection/listener_spec.h"
#include "proxy/connection/read_pressure.h"
#include "proxy/connection/sni_route.h"
#include "proxy/metrics/connection_metrics.h"
#include "proxy/net/close_reason.h"
#include "proxy/net/deadline_timer.h"
#include "proxy/net/self_connection.h"
#include "proxy/net/tcp_stream.h"
#include "proxy/net/upstream_connection.h"
#include "proxy/pipeline/pipeline.h"
#include "proxy/util/intrusive_list.h"

namespace kproxy::connection {

/// Request frames at least this large are forwarded while they arrive, when the pipeline allows
/// it (ClientConnection::stream_large_request): below it, a frame is read whole and sent in one
/// write with its neighbours.
inline constexpr size_t kStreamedRequestMin = 128 << 10;

/// The IntrusiveListHook links it into its worker's registry (Worker::connections_).
class ClientConnection final : public net::TcpStreamEvents,
                               public net::UpstreamConnectionEvents,
                               public pipeline::PipelineOutput,
                               public PausableReader,
                               public util::IntrusiveListHook {
 public:
  /// Created by the worker for an accepted socket: accept into client_stream(), then start().
  ClientConnection(ConnectionEnvironment& env, std::shared_ptr<const ListenerSpec> listener, std::shared_ptr<const config::Config> config,
                   uint64_t id);
  ~ClientConnection() override;

  uv_stream_t* client_stream() { return client_.stream(); }
  uint64_t id() const { return id_; }

  /// Starts reading the client and connecting to `upstream`.
  void start(const config::HostPort& upstream);
  /// Closes both sides now, logging `reason`. The object deletes itself once libuv is done.
  void close(net::CloseReason reason) override;
  /// Stops taking requests; closes once every in-flight request has its response.
  void drain();
  /// The same, closing with `reason` (its listener was removed at run time, say).
  void drain(net::CloseReason reason) { begin_drain(std::move(reason)); }
  /// The worker's broker discovery this connection waited for finished (ConnectionEnvironment::
  /// discover_brokers): route again, at the named broker if it was learnt, else at the bootstrap.
  void brokers_discovered();
  /// The listener (config index or run-time slot, proxy/runtime/proxy.h) that accepted it.
  size_t listener_index() const { return listener_->listener_index; }
  /// Where it is in its life (proxy/connection/connection_state.h): the index of its state.
  ConnectionState state() const { return static_cast<ConnectionState>(state_.index()); }
  /// In the preamble state, its phase ("awaiting_proxy_header", ...); "" in any other state.
  std::string_view preamble_phase() const;

  // TcpStreamEvents
  void on_stream_read(net::TcpStream& s, codec::Bytes data) override;
  void on_stream_error(net::TcpStream& s, int status, const char* during) override;
  void on_stream_writable(net::TcpStream& s) override;
  void on_stream_closed(net::TcpStream& s) override;
  void on_stream_tls_failed(net::TcpStream& s, const std::string& reason) override;
  void on_stream_tls_established(net::TcpStream& s) override;
  std::span<uint8_t> read_space(net::TcpStream& s) override;

  // UpstreamConnectionEvents
  void on_upstream_connected() override;
  void on_upstream_connect_failed(const std::string& reason) override;
  void on_upstream_is_self(const std::string& detail) override;
  void on_upstream_part_released() override;

  // PipelineOutput
  void send_to_broker(codec::Bytes bytes) override;
  void send_to_client(codec::Bytes bytes) override;
  void flush() override;
  void reset_client() override;
  void open_broker_port(int32_t node_id, uint16_t port) override;

  // PausableReader (proxy/connection/read_pressure.h)
  size_t partial_bytes() const override { return requests_.buffered(); }
  size_t partial_missing() const override { return requests_.missing(); }
  void pause_reads(const std::string& why) override;
  void resume_reads() override;

 private:
  /// Queues `bytes` on `to` with the least copying: a frame gathered by `reader` is moved over,
  /// a view into `piece` (the read being handled, flushed before its callback returns) is
  /// borrowed, anything else is copied.
  static void pass_on(net::TcpStream& to, codec::Bytes bytes, codec::FrameReader& reader, codec::Bytes piece);
  /// Stops reading `from` while `to` has too much queued: its write queue plus what a transport
  /// fault rule holds for it (Pipeline::held_bytes_to_*) above kWriteQueueHighWater. Resumes
  /// once `to` is not above the mark and the pipeline holds less than kWriteQueueLowWater.
  void apply_backpressure(net::TcpStream& from, net::TcpStream& to);
  /// Closes the client after it got what is queued for it (broker gone, drain finished).
  void finish(net::CloseReason reason);
  /// Logs and counts the close, moves to kClosing.
  void begin_close(const net::CloseReason& reason, const char* how);
  /// Stops reading the client and finishes with `reason` once every request has its response.
  void begin_drain(net::CloseReason reason);
  /// `reader`'s frame would pass limits.max_buffered_frame_bytes: counts and closes.
  void close_over_frame_budget(const codec::FrameReader& reader, const char* what);
  /// The SelfConnectionDetector key of `socket` (proxy/net/self_connection.h), empty if unknown.
  static net::ConnectionKey connection_key(uv_tcp_t* socket, bool accepted);
  /// kproxy reached itself (proxy/net/self_connection.h): logs what is misconfigured and closes.
  void refuse_self_connection(std::string detail);
  /// Cut-through: sends what arrived of a large request frame to the broker already, when the
  /// pipeline allows it (Pipeline::may_stream_request); the rest goes once the frame is whole.
  /// The send happens while the bytes are hot in the cache, instead of after the whole frame.
  /// Only on a connection that has had an answer (a real client, not a first packet), only while
  /// the request's announced size fits limits.max_streamed_request_bytes (a broker allocates it
  /// at once), and only while its bytes keep coming (limits.request_stall_timeout).
  void stream_large_request();
  /// Notes when the partial request frame being gathered began (after a read at `now`) and keeps
  /// the request deadline armed: limits.first_request_timeout until the first request is whole,
  /// limits.request_completion_timeout for each partial request frame.
  void track_request_deadline(std::chrono::steady_clock::time_point now);
  /// The earliest request deadline due now or later (max() when none), and whether it is the
  /// first-request one.
  std::chrono::steady_clock::time_point next_request_deadline(bool* first_request) const;
  /// The request deadline fired: closes the connection if a deadline has passed, else re-arms.
  void on_request_deadline();
  /// Gives back what the streamed request charged to the streamed-request budget.
  void release_streamed_charge();
  struct RareState;
  /// The state data of the states that have any (each made when the state is entered, on the
  /// heap: most connections never have a preamble, and only a drain has a reason).
  struct PreambleState;
  struct DrainState;
  /// The connection's states, in ConnectionState's order (connection_state.h). Each owns only
  /// its own data: the preamble its reader, deadline and held bytes; a drain its reason and the
  /// deadline for answers a half-closed client still waits for.
  struct Preamble {
    std::unique_ptr<PreambleState> data;
  };
  struct Connecting {};
  struct Forwarding {};
  struct Draining {
    std::unique_ptr<DrainState> data;
  };
  struct Closing {};
  struct Closed {};
  using State = std::variant<Preamble, Connecting, Forwarding, Draining, Closing, Closed>;
  /// Carries out what the preamble decided (proxy/connection/connection_preamble.h): keeps
  /// reading, forwards, routes, or refuses; re-arms the preamble's deadline.
  void on_preamble_step(PreambleStep step);
  /// The preamble is through: to forwarding (the upstream connected meanwhile) or connecting.
  void leave_preamble();
  /// Serves (TLS session installed, upstream connected to the route's target, the step's bytes
  /// replayed), refuses or closes as the step's SNI route says, logged with what the client asked
  /// for and counted. A broker no response named yet first waits, client unread, for the
  /// worker's discovery.
  void route_to(PreambleStep step);
  /// rare_, made on first use.
  RareState& rare_state();
  /// Arms the streamed request's stall deadline to close with `reason` at `at`.
  void arm_wait_deadline(std::chrono::steady_clock::time_point at, net::CloseReason reason);
  /// A draining connection with nothing left in flight or held finishes.
  void finish_drain_if_idle();
  void maybe_destroy();
  /// Moves to `next`, which must be a legal transition (can_transition).
  void enter(State next);
  bool closing() const { return state() >= ConnectionState::kClosing; }
  bool in(ConnectionState s) const { return state() == s; }

  /// Now, on the process's clock (ConnectionEnvironment::services()).
  std::chrono::steady_clock::time_point clock_now() const { return env_.services().clock.now(); }

  ConnectionEnvironment& env_;                    ///< the worker serving it
  std::shared_ptr<const ListenerSpec> listener_;  ///< shared with its Listener (ConnectionInfo views its name)
  std::shared_ptr<const config::Config> config_;
  uint64_t id_;
  /// "ip:port" of the client: the socket's peer, or the client a PROXY header named. Kept in the
  /// pipeline's ConnectionInfo, where the tap reads it.
  std::string& peer() { return pipeline_.connection_info().client_address; }
  /// "127.0.0.1:9093 (10.0.0.5:9093)": the broker as configured or advertised, and where it resolved.
  std::string upstream_peer();
  net::TcpStream client_;
  net::UpstreamConnection upstream_;
  codec::FrameReader requests_;
  codec::FrameReader responses_;
  /// The bytes being handled by on_stream_read, from either side (empty outside it): a frame
  /// that lies in them may leave as a view of them, as both streams are flushed before the read
  /// callback returns. One for both sides: libuv runs one read callback at a time.
  codec::Bytes read_piece_;
  State state_;                  ///< connecting until start() chooses (initialised in the .cc: the state data types are complete there)
  bool answered_ = false;        ///< something was sent to the client: it is past its first packet
  bool stream_refused_ = false;  ///< the frame being gathered did not fit the streamed-request budget (counted once)
  bool memory_paused_ = false;   ///< ReadPressure stopped reading the client (pause_reads)
  /// This connection's keys in the SelfConnectionDetector (empty = not registered).
  net::ConnectionKey client_endpoint_;
  net::ConnectionKey upstream_endpoint_;
  metrics::ConnectionMetrics metrics_{env_.services().metrics,
                                      listener_->listener_index};  ///< per-listener gauges, in-flight, bytes (observability)
  /// The stages every frame passes through (proxy/pipeline/pipeline.h); keeps responses in request order.
  pipeline::Pipeline pipeline_;
  /// What only some connections need, on the heap and made on first use: the deadline that closes
  /// the connection when a streamed request stalls (limits.request_stall_timeout), with its
  /// reason; the announced bytes of the request being streamed (charged to
  /// ConnectionEnvironment::streamed_budget()); on a TLS listener, the deadline for the client's
  /// handshake (limits.tls_handshake_timeout).
  std::unique_ptr<RareState> rare_;
  std::chrono::steady_clock::time_point opened_at_;
  uint64_t requests_in_ = 0;
  /// When the partial request frame being gathered began, in ms after opened_at_ (kNoPartial:
  /// none), and requests_.frames() then, mod 2^32 (another count means another frame). 32 bits
  /// each: every idle connection carries them (client_connection_test.cc's size budget).
  static constexpr uint32_t kNoPartial = UINT32_MAX;
  uint32_t partial_since_ms_ = kNoPartial;
  uint32_t partial_frame_index_ = 0;
  /// Closes a connection whose first request or current request frame is late (see
  /// track_request_deadline). A bare handle (8 bytes, allocated while armed): its due time is
  /// libuv's (uv_timer_get_due_in).
  net::UvHandle<uv_timer_t> request_timer_;
  static void on_request_timer(uv_timer_t* timer);
  void arm_request_timer(std::chrono::steady_clock::time_point at);
};

}  // namespace kproxy::connection
