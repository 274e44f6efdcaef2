// Pipeline: one client connection's ordered chain of stages, and the keeper of request/response
// order. The connection (proxy/connection/client_connection.h) owns the sockets and framing; it hands every
// whole frame to the pipeline and gets bytes back through one interface, PipelineOutput.
//
//  request:  ClientConnection ─frame─► Pipeline::on_request_frame
//              header parsed; SASL v0 raw tokens pass through; Produce acks=0 expects no answer
//              ─► the stages that want its API, in order (on_request):
//                   api_versions (ApiVersions) ─► fault_rules ─► observer
//              ─► answered by a stage: its answer takes a slot, the broker never sees the request
//                 held by a delay:    waits (and so does every later request, order holds)
//                 else:               PipelineOutput::send_to_broker (through the request's shaper)
//
//  response: ClientConnection ─frame─► Pipeline::on_response_frame
//              matched with the oldest forwarded request (a correlation id mismatch closes)
//              ─► the stages that want its API, in order (on_response):
//                   broker_address (APIs naming brokers) ─► api_versions (ApiVersions)
//                   ─► topic_ids (Metadata) ─► fault_rules ─► observer
//              ─► its slot; slots leave in request order (kProxy's own answers included),
//                 after any delay, through the response's shaper: PipelineOutput::send_to_client
//
// The stages are one table, KPROXY_STAGES in proxy/stage/stage.h (members, construction, order
// and StageRoutes derive from it; the includes of the stages below, from the libraries of
// their domains, are the only other place that names them). A frame nobody
// changed leaves as its original bytes; a changed one is re-encoded with a patched size prefix.
//
// The pipeline carries out the stages' generic results (ExchangeActions in
// proxy/stage/frame_context.h, ByteShaper in proxy/stage/byte_shaper.h) and knows nothing of
// why a stage asked: hold a request or a response, send a request more than once (the extra
// answers discarded), swallow a response (later ones keep their order) or close the connection in
// its place when it is next to leave, and pass a direction's bytes through a stage's shaper. The
// fault stage builds its actions from these (blackhole, close after, reset after bytes, bandwidth,
// slice: proxy/chaos/fault_stage.h).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <uv.h>

#include "codec/request_header.h"
#include "proxy/chaos/api_versions_stage.h"
#include "proxy/chaos/fault_stage.h"
#include "proxy/chaos/rule_set.h"
#include "proxy/chaos/rule_snapshot.h"
#include "proxy/cluster/broker_address_stage.h"
#include "proxy/cluster/topic_ids_stage.h"
#include "proxy/metrics/connection_metrics.h"
#include "proxy/net/close_reason.h"
#include "proxy/net/deadline_timer.h"
#include "proxy/observe/observer_stage.h"
#include "proxy/stage/byte_shaper.h"
#include "proxy/stage/frame_context.h"
#include "proxy/stage/frame_observer.h"
#include "proxy/stage/sasl_raw_tokens.h"
#include "proxy/stage/services.h"
#include "proxy/stage/stage.h"
#include "proxy/util/lazy_deque.h"
#include "proxy/util/ring_queue.h"

namespace kproxy::pipeline {

/// The process's stage routes (stage::StageRoutes): every stage's wants_request / wants_response
/// asked once per API key, in KPROXY_STAGES order; made on first use.
const stage::StageRoutes& stage_routes();

/// The connection's side of the pipeline: where its bytes and decisions go. Called on the loop
/// thread, from within Pipeline's calls or from its timers.
class PipelineOutput : public stage::BrokerPortOpener {
 public:
  /// Bytes for the broker / for the client, in order.
  virtual void send_to_broker(codec::Bytes bytes) = 0;
  virtual void send_to_client(codec::Bytes bytes) = 0;
  /// Bytes went out from a timer (a delay ended, a shaper released a piece): write both sides and
  /// re-check backpressure, as held_bytes_to_*() went down.
  virtual void flush() = 0;
  /// Close the connection now. The pipeline sends nothing afterwards.
  virtual void close(net::CloseReason reason) = 0;
  /// Make the next close of the client socket a reset (RST) instead of an orderly FIN.
  virtual void reset_client() = 0;
};

class Pipeline final : private stage::ShaperPort {
 public:
  /// `rewrite`: the listener's broker addresses; `metrics`: the connection's gauges (requests in
  /// flight, client software); `services`: the process's (the frame observer, topic names...).
  Pipeline(uv_loop_t* loop, const chaos::LiveRules& chaos, const cluster::BrokerAddressRewrite& rewrite, stage::ConnectionInfo info,
           PipelineOutput& output, metrics::ConnectionMetrics& metrics, const stage::Services& services);
  ~Pipeline() override;
  /// What the stages see of the connection (the owner sets its client address).
  stage::ConnectionInfo& connection_info() { return info_; }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// A whole request frame (size prefix included) from the client. False when the connection was
  /// closed because of it. `now`: when it arrived; the frames of one read share one clock
  /// reading (the connection takes it once per read). `streamed`: the frame's first bytes went to
  /// the broker while it arrived (may_stream_request); it must be forwarded now and unchanged.
  bool on_request_frame(codec::Bytes frame, util::Clock::time_point now, bool streamed = false);
  /// The same, arrived at the services' clock's now.
  bool on_request_frame(codec::Bytes frame) { return on_request_frame(frame, clock_.now()); }
  /// Cut-through of a large request (docs/architecture.md "Large frames"): may the connection
  /// send the start of the request frame `head` (size prefix included, the rest still arriving)
  /// to the broker now? Yes when the frame can only be forwarded unchanged and at once: its
  /// header parses, its API is one no stage acts on before forwarding (not ApiVersions, not SASL),
  /// no fault rule names its API, no delayed request is waiting and no transport rule shapes the
  /// requests. Every stage still sees the whole frame when it is complete (on_request_frame).
  bool may_stream_request(codec::Bytes head);
  /// A whole response frame from the broker. False when the connection was closed because of it.
  bool on_response_frame(codec::Bytes frame, util::Clock::time_point now);
  /// The same, arrived at the services' clock's now.
  bool on_response_frame(codec::Bytes frame) { return on_response_frame(frame, clock_.now()); }
  /// Gives back the memory of the queue of requests awaiting answers when nothing is in it (the
  /// connection calls it after each read: an idle connection holds no queue).
  void release_idle_memory();

  /// Bytes held for the client / for the broker, not yet handed to the output: what a direction's
  /// shaper has queued, responses waiting for a delay (or behind one, to keep their order),
  /// requests waiting for a delay. They count toward that side's write-queue high-water mark
  /// (proxy/net/tcp_stream.h): a slow bandwidth rule or a long delay stops kproxy reading the
  /// other side instead of filling its memory.
  size_t held_bytes_to_client() const {
    return (shaping_ && shaping_->to_client ? shaping_->to_client->queued_bytes() : 0) + held_response_bytes_;
  }
  size_t held_bytes_to_broker() const {
    return (shaping_ && shaping_->to_broker ? shaping_->to_broker->queued_bytes() : 0) + held_request_bytes_;
  }

  /// Requests forwarded to the broker and not yet answered.
  size_t awaiting_broker() const { return awaiting_broker_; }
  /// True when nothing is in flight, held or waiting to be sent: a draining connection may close.
  bool idle() const { return slots_.empty() && held_.empty(); }
  /// Requests waiting for their response (or for their turn to be answered).
  size_t in_flight() const { return slots_.size(); }

  /// Stops timers; nothing is sent afterwards.
  void shutdown();

 private:
  struct Slot;
  struct HeldRequest;

  /// Sends `frame` to the broker now (through the broker direction's shaper, if any, with
  /// `shape`); the slot of the request, when it expects a response, is then waiting for it.
  void forward(codec::Bytes frame, bool expects_response, const stage::ShapeSpec* shape, std::chrono::steady_clock::time_point now);
  /// ExchangeActions::copies > 1: `count` slots for the extra copies of the request whose slot is
  /// the last one, behind it; the broker's answers to them are discarded (rare: out of line, so
  /// the common path builds no slot).
  [[gnu::noinline]] void push_discarded_copies(int count);
  /// `count` extra copies of a request to the broker (out of line, like their slots).
  [[gnu::noinline]] void send_copies(int count, codec::Bytes frame, bool expects_response,
                                     const std::shared_ptr<const stage::ShapeSpec>& shape, std::chrono::steady_clock::time_point now);
  /// Queues `frame` behind the held requests, released `delay` from now (or after the last one).
  void hold(codec::Bytes frame, bool expects_response, std::chrono::milliseconds delay,
            const std::shared_ptr<const stage::ShapeSpec>& shape, std::chrono::steady_clock::time_point now);
  /// Sends what is ready at `now`, in order; arms the timer for what is not.
  void pump(std::chrono::steady_clock::time_point now);
  void pump() { pump(clock_.now()); }
  // ShaperPort: what the stages' shapers use (StageSetup::shapers).
  uv_loop_t* loop() override { return loop_; }
  stage::ShapedSink& sink(stage::Flow flow) override;
  stage::ByteShaper* install(stage::Flow flow, std::unique_ptr<stage::ByteShaper> shaper) override;
  stage::ByteShaper* installed(stage::Flow flow) override;
  void arm_timer(std::chrono::steady_clock::time_point at);
  /// Removes the oldest slot, keeping held_response_bytes_ right.
  void pop_front_slot();
  /// True when the answer of slot `index` (with `own` decided for it) will not reach the client:
  /// swallowed, or the connection closes in its place or before it (ResponseContext::withheld();
  /// a shaper's reset is its stage's to say).
  bool response_withheld(size_t index, const stage::ExchangeActions& own) const;
  /// Bytes for the client / the broker: through the direction's shaper once a stage installed
  /// one (it keeps the order of everything after), else straight to the output.
  void send_client(codec::Bytes bytes, const stage::ShapeSpec* shape = nullptr);
  void send_broker(codec::Bytes bytes, const stage::ShapeSpec* shape);
  void close(net::CloseReason reason);
  /// Calls `visit(stage)` (with the stage's own type: no virtual call) for the stages of `mask`
  /// (StageRoutes) in table order (KPROXY_STAGES,
  /// proxy/stage/stage.h) while it returns true; false when a call returned false.
  template <class Visit>
  bool for_each_stage(stage::StageMask mask, Visit&& visit) {
#define KPROXY_STAGE_VISIT(id, name, type) \
  if ((mask & (1u << static_cast<size_t>(stage::StageId::id))) && !visit(id##_)) return false;
    KPROXY_STAGES(KPROXY_STAGE_VISIT)
#undef KPROXY_STAGE_VISIT
    return true;
  }
  /// The constructor, with the setup every stage is made from.
  Pipeline(uv_loop_t* loop, const chaos::LiveRules& chaos, stage::ConnectionInfo info, PipelineOutput& output,
           metrics::ConnectionMetrics& metrics, const stage::StageSetup& setup);

  /// One direction of the output, as a shaper sees it.
  struct Sink final : stage::ShapedSink {
    Sink(Pipeline& pipeline, stage::Flow flow) : pipeline(pipeline), flow(flow) {}
    void write(codec::Bytes bytes) override;
    void flush() override;
    void close(net::CloseReason reason, bool reset) override;
    Pipeline& pipeline;
    stage::Flow flow;
  };
  /// The sinks and the installed shapers: made the first time a stage asks (most connections never
  /// do, and hold one null pointer).
  struct Shaping {
    explicit Shaping(Pipeline& p) : client(p, stage::Flow::kToClient), broker(p, stage::Flow::kToBroker) {}
    Sink client, broker;
    std::unique_ptr<stage::ByteShaper> to_client, to_broker;  ///< after the sinks they write to (destroyed first)
  };

  stage::ConnectionInfo info_;
  uv_loop_t* loop_;
  const util::Clock& clock_;  ///< the services' (deadlines of delays and holds)
  PipelineOutput& output_;
  // Before the stages: their shapers write to these sinks.
  std::unique_ptr<Shaping> shaping_;
  metrics::ConnectionMetrics& metrics_;
  chaos::RuleSnapshot rules_;

  // The stages, one member each, named after their StageId (kFaultRules_, ...), in table order.
#define KPROXY_STAGE_MEMBER(id, name, type) type id##_;
  KPROXY_STAGES(KPROXY_STAGE_MEMBER)
#undef KPROXY_STAGE_MEMBER

  stage::SaslRawTokens sasl_;
  /// Raw SASL answers may arrive with nothing in flight (a mechanism with unanswered tokens).
  bool unanswered_sasl_tokens_ = false;
  bool closed_ = false;  ///< beside the flag above: one word for both in every connection
  // Allocated on first use (an idle connection holds neither; proxy/util/ring_queue.h, proxy/util/lazy_deque.h).
  util::RingQueue<Slot> slots_;                ///< one per request that gets an answer, in request order
  util::LazyDeque<HeldRequest> held_;          ///< broker-bound requests waiting for a delay
  size_t forwarded_ahead_ = 0;                 ///< slots (from the front) up to the next one to forward
  size_t answered_ahead_ = 0;                  ///< slots (from the front) up to the next one awaiting the broker
  size_t awaiting_broker_ = 0;                 ///< forwarded slots without a response yet
  size_t held_request_bytes_ = 0;              ///< frames in held_
  size_t held_response_bytes_ = 0;             ///< encoded responses in slots_
  std::unique_ptr<net::DeadlineTimer> timer_;  ///< releases delayed requests and responses (made on first use)
};

}  // namespace kproxy::pipeline
