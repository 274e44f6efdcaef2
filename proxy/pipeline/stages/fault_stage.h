// FaultStage: the fault rules (chaos) of the config and the admin API.
//
// Requests: each rule whose match holds (header first, then lazily the body's entities) and whose
// trigger fires applies its action: answer the request itself (the broker never sees it), close
// before forwarding, delay the request, or record what must happen to the response (error codes,
// throttle, delay, drop, close after, reset after N bytes, bandwidth/slice of either direction) in
// the exchange's ExchangeActions, which the pipeline keeps with the request.
// A rule's trigger is drawn (its hit counted, its `times`/`nth`/probability budget spent) only
// when its action would take effect on this exchange: an answer once another rule has answered,
// an error or throttle on a request kproxy answers itself, anything on the response of a request
// that gets none (Produce acks=0) neither counts nor spends. Answer and close-before decide the
// fate of the request, so the first of those that fires wins and the later ones are not drawn.
// Responses: sets the recorded error codes (translated to what the response's version can carry,
// proxy/chaos/error_translation.h) and throttle time; the pipeline applies the transport actions.
// docs/faults.md says what each action does and what a client sees.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "proxy/cluster/topic_names.h"
#include "proxy/pipeline/frame_observer.h"
#include "proxy/pipeline/services.h"
#include "proxy/pipeline/stage.h"

namespace kproxy::chaos {
struct FaultRule;
struct RuleAction;
}  // namespace kproxy::chaos

namespace kproxy::proxy {

class RuleSnapshot;

class FaultStage final : public Stage {
 public:
  /// `connection_id` seeds the delay jitter, so a connection's sequence is reproducible.
  /// `topic_names`: names rules by topic match on requests and responses that carry only ids.
  FaultStage(RuleSnapshot& rules, std::shared_ptr<FrameObserver> observer, const TopicNames& topic_names, uint64_t connection_id)
      : rules_(rules), observer_(or_no_observer(std::move(observer))), topic_names_(topic_names),
        jitter_state_(0x9e3779b97f4a7c15ULL ^ connection_id) {}
  explicit FaultStage(const StageSetup& setup)
      : FaultStage(setup.rules, setup.services.observer, setup.services.topic_names, setup.connection_id) {}
  StageId id() const override { return StageId::kFaultRules; }
  void on_request(RequestContext& ctx) override;
  void on_response(ResponseContext& ctx) override;

 private:
  bool matches(const chaos::FaultRule& rule, const RequestContext& ctx) const;
  /// True when `rule`'s action would take effect on this exchange as it stands (see above).
  static bool applies(const chaos::FaultRule& rule, const RequestContext& ctx);
  /// Logs the injection and tells the observer.
  void fired(const chaos::FaultRule& rule, const RequestContext& ctx);
  std::chrono::milliseconds jittered(const chaos::RuleAction& a);

  RuleSnapshot& rules_;
  std::shared_ptr<FrameObserver> observer_;
  const TopicNames& topic_names_;
  uint64_t jitter_state_;
};

}  // namespace kproxy::proxy
