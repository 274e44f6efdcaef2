// Pipeline: the per-connection chain of stages every Kafka frame goes through, and the hook the
// observability side (metrics, tap) plugs into.
//
//  client ─► ClientConnection ─► header parsed ─► Pipeline::on_request ──────────────────────────┐
//                                                   1. ApiVersions: too-new request → own v0 answer; KIP-511 name/version
//                                                   2. fault rules: match (header, then lazily the body's entities),
//                                                      trigger, then answer | close before | delay request | mark the
//                                                      response side (error, throttle, delay, drop, close after, reset,
//                                                      bandwidth/slice of the response)
//                                                   3. observer.on_request
//            requests leave in arrival order (a delayed one holds those behind it) ──► upstream
//
//  client ◄── ordered slots ◄── Pipeline::on_response ◄── broker-address rewrite ◄── FIFO match ◄── upstream
//             (one per request    1. ApiVersions rewrite (clamp/hide, decode limits); Metadata: topic ids
//              expecting an          learned (proxy/topic_names.h) for `topic:` rules on Produce/Fetch v13+
//              answer; synthetic  2. fault actions marked on the slot: error codes, throttle, delay, drop, close after
//              answers take their 3. observer.on_response (latency = broker round trip)
//              place, so order holds)
//
// Bodies are decoded lazily, once: RequestContext/ResponseContext::message() decodes on first use
// (codec make_request/make_response) and keeps a shared_ptr that observers may keep too. A stage
// that changes a body calls mark_dirty(); the frame is then re-encoded with a patched size prefix.
// A frame nobody changed leaves as its original bytes. Stages that only need a response's error
// codes use ResponseContext::scan() (codec::scan_response: no decode, no allocation), made once
// per frame, or handed in by the broker-address rewrite that already walked the body.
//
// drop_response (blackhole): the response is swallowed and so is every later response on that
// connection, as if the broker had hung. Delivering later ones would break clients that match
// responses to requests in order (Java's NetworkClient fails the connection on a correlation id
// mismatch); a real client times the request out (request.timeout.ms), closes the connection and
// retries on a new one, which is the behaviour under test.
//
// close after: the request is forwarded (the broker does the work); when its response arrives it
// is swallowed and the client connection closed: the outcome is unknown to the client.
//
// Transport toxics (bandwidth, slice) shape the bytes of the exchange a rule matched: the request
// on its way to the broker (send_broker) and/or the response on its way to the client, through one
// chaos::TransportShaper per direction (proxy/chaos/transport_shaper.h). reset_after_bytes sends
// the next N response bytes, then resets the client connection (RST, like Toxiproxy's reset_peer);
// bytes a shaper still holds at that moment are lost with the connection, as on a real reset.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <uv.h>

#include "codec/message.h"
#include "codec/request_header.h"
#include "codec/generated/response_scan.h"
#include "proxy/chaos/rule_set.h"
#include "proxy/chaos/transport_shaper.h"
#include "proxy/deadline_timer.h"
#include "proxy/lazy_deque.h"

namespace kproxy::proxy {

/// What the pipeline knows of its connection; observers receive it with every frame.
struct ConnectionInfo {
  uint64_t id = 0;
  std::string listener;
  /// The listener's position in the config (metrics slots), resolved once per connection.
  size_t listener_index = 0;
  std::string peer;
  /// KIP-511, from ApiVersions v3+ ("" until seen).
  std::string client_software_name;
  std::string client_software_version;
};

/// A request frame in flight through the pipeline.
class RequestContext {
 public:
  RequestContext(const codec::RequestHeader& header, codec::Bytes frame, const ConnectionInfo& connection)
      : header_(header), frame_(frame), connection_(connection) {}

  const codec::RequestHeader& header() const { return header_; }
  /// The original frame, size prefix included.
  codec::Bytes frame() const { return frame_; }
  const ConnectionInfo& connection() const { return connection_; }
  /// The decoded body (decoded on first call), or nullptr when the version is unknown or the body
  /// does not decode (then decode_error() says why). Views point into frame().
  std::shared_ptr<codec::Message> message() const;
  const std::string& decode_error() const { return decode_error_; }

 private:
  const codec::RequestHeader& header_;
  codec::Bytes frame_;
  const ConnectionInfo& connection_;
  mutable std::shared_ptr<codec::Message> message_;
  mutable bool decoded_ = false;
  mutable std::string decode_error_;
};

/// A response frame (after broker-address rewriting) about to go to the client.
class ResponseContext {
 public:
  ResponseContext(int16_t api_key, int16_t api_version, int header_version, codec::Bytes frame, const ConnectionInfo& connection)
      : api_key_(api_key), api_version_(api_version), header_version_(header_version), frame_(frame), connection_(connection) {}

  int16_t api_key() const { return api_key_; }
  int16_t api_version() const { return api_version_; }
  /// The version the body decodes at (ApiVersions' v0 fallback may differ from api_version()).
  int16_t body_version() const { return body_version_; }
  int header_version() const { return header_version_; }
  codec::Bytes frame() const { return frame_; }
  const ConnectionInfo& connection() const { return connection_; }
  /// True for answers kproxy built itself (the broker never saw the request).
  bool synthetic() const { return synthetic_; }
  std::shared_ptr<codec::Message> message() const;
  const std::string& decode_error() const { return decode_error_; }
  /// The body's error codes (with their offsets) and top-level tags, scanned without decoding on
  /// first call (or given by an earlier stage), or nullptr when the body does not scan. Describes
  /// the original frame(): once a stage has changed the body (dirty()), use message() instead.
  const codec::ResponseScan* scan() const;
  /// Uses `scan` (of this frame's body, made by an earlier stage; it must outlive the context)
  /// instead of scanning again.
  void adopt_scan(const codec::ResponseScan* scan) {
    scan_ = scan;
    scanned_ = scan != nullptr;
  }
  void mark_dirty() { dirty_ = true; }
  bool dirty() const { return dirty_; }
  /// The frame to send: the original bytes, or the re-encoded body with a patched size prefix.
  std::vector<uint8_t> encode() const;

 private:
  friend class Pipeline;
  int16_t api_key_, api_version_;
  int16_t body_version_ = -1;
  int header_version_;
  codec::Bytes frame_;
  const ConnectionInfo& connection_;
  bool synthetic_ = false;
  bool dirty_ = false;
  mutable const codec::ResponseScan* scan_ = nullptr;
  mutable bool scanned_ = false;
  mutable std::optional<codec::ResponseScan> own_scan_;
  mutable std::shared_ptr<codec::Message> message_;
  mutable bool decoded_ = false;
  mutable std::string decode_error_;
};

/// A rule fired on a frame.
struct FaultEvent {
  const chaos::FaultRule& rule;
  int16_t api_key;
  int16_t api_version;
  const ConnectionInfo& connection;
};

/// Observes every frame (metrics, tap). Called on the worker's loop thread: must be quick and must
/// not block. Install one process-wide with set_frame_observer() before connections open.
class FrameObserver {
 public:
  virtual ~FrameObserver() = default;
  /// A request as it leaves for the broker (or is answered by kproxy).
  virtual void on_request(const RequestContext&) {}
  /// A response as it goes to the client; `latency` = broker round trip seen by kproxy (0 for
  /// synthetic answers).
  virtual void on_response(const ResponseContext&, std::chrono::nanoseconds /*latency*/) {}
  /// A fault rule injected its action on a frame.
  virtual void on_fault_injected(const FaultEvent&) {}
};

/// Sets the process-wide observer (nullptr = none). Connections opened afterwards use it.
void set_frame_observer(std::shared_ptr<FrameObserver> observer);
std::shared_ptr<FrameObserver> frame_observer();

/// What ClientConnection does with a request after Pipeline::on_request.
enum class RequestVerdict : uint8_t {
  kForward,  ///< forward now (push the in-flight entry, send the frame)
  kHeld,     ///< the pipeline holds it (delay) and forwards it later through the sink
  kAnswered, ///< kproxy answered; do not forward
  kClose,    ///< close the connection (reason in close_reason())
};

class Pipeline {
 public:
  /// The connection's side of things, called by the pipeline.
  struct Sink {
    /// Forward a request now: push its in-flight entry (when `expects_response`), send the bytes.
    std::function<void(codec::Bytes frame, const codec::RequestHeader& header, bool expects_response)> forward_request;
    /// Append bytes for the client.
    std::function<void(codec::Bytes bytes)> send_client;
    /// Flush both directions (after timer-driven sends, e.g. a shaper releasing bytes: the
    /// connection re-checks backpressure there, as held_bytes_to_*() went down).
    std::function<void()> flush;
    std::function<void(const std::string& reason)> close;
    /// Append bytes for the broker (what forward_request sends goes through Pipeline::send_broker).
    std::function<void(codec::Bytes bytes)> send_broker;
    /// Make the next close of the client socket a reset (RST) instead of an orderly FIN.
    std::function<void()> reset_client;
  };

  Pipeline(uv_loop_t* loop, const chaos::ChaosControl& chaos, ConnectionInfo info, Sink sink);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// A parsed request. `expects_response` false for Produce acks=0.
  RequestVerdict on_request(const codec::RequestHeader& header, codec::Bytes frame, bool expects_response);
  /// A broker response to the oldest forwarded request (`api_key` v`api_version`, response header
  /// `header_version`, `sent_at` when forwarded). Sends, holds, or drops it; may close. `scan`:
  /// the body of `frame` already scanned by an earlier stage (nullptr: scanned when needed).
  void on_response(int16_t api_key, int16_t api_version, int header_version, codec::Bytes frame, std::chrono::steady_clock::time_point sent_at,
                   const codec::ResponseScan* scan = nullptr);

  /// The way a forwarded request's bytes reach the broker (Sink::forward_request implementations
  /// call it): shaped when a transport rule fired on that request, else passed to Sink::send_broker.
  void send_broker(codec::Bytes bytes);

  /// Bytes a fault rule holds for the client / for the broker, not yet handed to the Sink: what a
  /// transport toxic has queued, responses waiting for a delay (or behind one, to keep their
  /// order), requests waiting for a delay. They count toward that side's write-queue high-water
  /// mark (proxy/tcp_stream.h): a slow bandwidth rule or a long delay stops kproxy reading the
  /// other side instead of filling its memory.
  size_t held_bytes_to_client() const { return to_client_.queued_bytes() + held_response_bytes_; }
  size_t held_bytes_to_broker() const { return to_broker_.queued_bytes() + held_request_bytes_; }

  const std::string& close_reason() const { return close_reason_; }
  const ConnectionInfo& info() const { return info_; }
  /// Stops timers; nothing is sent afterwards.
  void shutdown();

 private:
  struct ResponseActions;
  struct Slot;
  struct HeldRequest;

  const chaos::RuleSet& rules();
  bool matches(const chaos::FaultRule& rule, const codec::RequestHeader& header, RequestContext& ctx) const;
  void fired(const chaos::FaultRule& rule, const codec::RequestHeader& header);
  void apply_response_actions(Slot& slot, ResponseContext& ctx);
  /// Sends what is ready, in order; arms the timer for what is not.
  void pump();
  void arm_timer(std::chrono::steady_clock::time_point at);
  /// Removes the oldest slot (keeping held_response_bytes_ right) and returns it, or drops it.
  Slot take_front_slot();
  void pop_front_slot();
  void send_client(codec::Bytes bytes, const chaos::TransportToxic* toxic = nullptr);
  std::chrono::milliseconds jittered(const chaos::RuleAction& a);

  const chaos::ChaosControl& chaos_;
  uint64_t generation_ = 0;
  std::shared_ptr<const chaos::RuleSet> rules_;
  std::shared_ptr<FrameObserver> observer_;
  ConnectionInfo info_;
  Sink sink_;
  // Allocated on first use (an idle connection holds neither; proxy/lazy_deque.h).
  LazyDeque<Slot> slots_;            ///< client-bound, in request order
  LazyDeque<HeldRequest> held_;      ///< broker-bound requests waiting for a delay
  size_t held_request_bytes_ = 0;   ///< frames in held_
  size_t held_response_bytes_ = 0;  ///< encoded responses in slots_
  DeadlineTimer timer_;              ///< releases delayed requests and responses
  bool blackholed_ = false;
  bool closed_ = false;
  std::optional<uint64_t> reset_budget_;  ///< bytes left before a reset_after_bytes close
  uint64_t jitter_state_;
  std::string close_reason_;
  chaos::TransportShaper to_client_, to_broker_;
  /// The toxic of the request being forwarded right now (set around Sink::forward_request).
  std::optional<chaos::TransportToxic> request_toxic_;
};

}  // namespace kproxy::proxy
