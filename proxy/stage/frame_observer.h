// FrameObserver: what watches every frame without changing it (metrics, tap). The pipeline's
// last stage (proxy/observe/observer_stage.h) calls it; fault rules report their injections to it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "proxy/stage/frame_context.h"

namespace kproxy::chaos {
struct FaultRule;
}

namespace kproxy::stage {

/// A rule fired on a frame.
struct FaultEvent {
  const chaos::FaultRule& rule;
  int16_t api_key;
  int16_t api_version;
  const ConnectionInfo& connection;
};

/// Observes every frame (metrics, tap). Called on the worker's loop thread: must be quick and must
/// not block. The process's services hold the one kproxy uses (proxy/stage/services.h).
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
  /// A response handed to on_response as delivered never reached the client: its connection
  /// closed while a delay rule held it.
  virtual void on_response_withheld(uint64_t /*connection_id*/, int32_t /*correlation_id*/) {}
  /// The connection `connection_id` closed (its pipeline is gone): what was kept for it can go.
  virtual void on_connection_closed(uint64_t /*connection_id*/) {}
};

/// `observer`, or the do-nothing one when it is null: what a stage keeps instead of a nullable pointer.
std::shared_ptr<FrameObserver> or_no_observer(std::shared_ptr<FrameObserver> observer);

}  // namespace kproxy::stage
