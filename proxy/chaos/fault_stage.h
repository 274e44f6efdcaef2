// FaultStage: the fault rules (chaos) of the config and the admin API.
//
// Requests: each rule whose match holds (header first, then lazily the body's entities) and whose
// trigger fires applies its action through the pipeline's generic results (ExchangeActions,
// proxy/stage/frame_context.h), which the pipeline keeps with the request:
//   answer            RequestContext::answer (the broker never sees the request)
//   close (request)   RequestContext::close (before forwarding)
//   close (response)  fate kCloseInstead: the connection closes when the response is next to leave
//   delay             request_delay / response_delay
//   drop_response     fate kSwallow, and the stage's own state: the connection is blackholed, so
//                     every later exchange's response is swallowed too, as if the broker had hung
//                     (delivering later ones would break clients that match responses to requests
//                     in order: Java's NetworkClient fails the connection on a correlation id
//                     mismatch; a real client times the request out and retries elsewhere)
//   duplicate_request copies = 2 (the second answer is discarded)
//   error, throttle   the stage's ExchangeNote; applied when the response passes (below)
//   bandwidth, slice, reset_after_bytes
//                     a FaultShape for the direction's FaultShaper (fault_shaper.h), which the
//                     stage installs on the direction the first time a rule shapes it
// Adding an action is its parsing (proxy/chaos/fault_rule.{h,cc}) and its case here; the
// framework does not change (docs/architecture.md "Adding a fault action").
// A rule's trigger is drawn (its hit counted, its `times`/`nth`/probability budget spent) only
// when its action would take effect on this exchange: an answer once another rule has answered,
// an error or throttle on a request kproxy answers itself, anything on the response of a request
// that gets none (Produce acks=0) neither counts nor spends. Answer and close-before decide the
// fate of the request, so the first of those that fires wins and the later ones are not drawn.
// Responses: sets the recorded error codes (translated to what the response's version can carry,
// proxy/chaos/error_translation.h) and throttle time, and marks a response withheld when a reset
// comes before its last byte.
// docs/faults.md says what each action does and what a client sees.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "proxy/chaos/fault_shaper.h"
#include "proxy/cluster/topic_names.h"
#include "proxy/stage/byte_shaper.h"
#include "proxy/stage/frame_observer.h"
#include "proxy/stage/services.h"
#include "proxy/stage/stage.h"

namespace kproxy::chaos {

struct FaultRule;
struct RuleAction;
class RuleSnapshot;

class FaultStage final : public stage::Stage {
 public:
  /// `connection_id` seeds the delay jitter, so a connection's sequence is reproducible.
  /// `topic_names`: names rules by topic match on requests and responses that carry only ids.
  /// `services` (which must outlive the stage): the frame observer told of each injection, the
  /// topic names rules match by on frames that carry only ids, and the clock a rule's window
  /// (window.after / for) and the shapers' release times are read on. `shapers`: where the stage
  /// installs its shapers (null: bandwidth, slice and reset_after_bytes rules do not apply, as in
  /// tests of the stage alone).
  FaultStage(RuleSnapshot& rules, const stage::Services& services, uint64_t connection_id, stage::ShaperPort* shapers = nullptr)
      : rules_(rules), services_(services), shapers_(shapers), jitter_state_(0x9e3779b97f4a7c15ULL ^ connection_id) {}
  explicit FaultStage(const stage::StageSetup& setup) : FaultStage(setup.rules, setup.services, setup.connection_id, &setup.shapers) {}
  stage::StageId id() const override { return stage::StageId::kFaultRules; }
  void on_request(stage::RequestContext& ctx) override;
  void on_response(stage::ResponseContext& ctx) override;

 private:
  bool matches(const FaultRule& rule, const stage::RequestContext& ctx) const;
  /// True when `rule`'s action would take effect on this exchange as it stands (see above).
  bool applies(const FaultRule& rule, const stage::RequestContext& ctx) const;
  /// The direction's shaper, made and installed on first use; null when it cannot be (no port,
  /// or another stage's shaper holds the direction).
  FaultShaper* shaper(stage::Flow flow);
  /// Logs the injection and tells the observer.
  void fired(const FaultRule& rule, const stage::RequestContext& ctx);
  std::chrono::milliseconds jittered(const RuleAction& a);

  RuleSnapshot& rules_;
  const stage::Services& services_;
  stage::ShaperPort* shapers_;
  uint64_t jitter_state_;
  /// A drop_response fired: every later exchange's response is swallowed (blackhole).
  bool blackholed_ = false;
  /// The stage installed a client-direction shaper (made on the first rule that shapes it; the
  /// pipeline owns it and hands it back: shaper()).
  bool shapes_client_ = false;
};

}  // namespace kproxy::chaos
