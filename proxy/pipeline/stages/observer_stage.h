// ObserverStage: the last stage. Hands every request (as it leaves, or is answered by kproxy)
// and every response (as it goes to the client) to the process's FrameObserver: metrics and the
// tap (proxy/observe/frame_metrics.h). Observers change nothing.
#pragma once

#include <memory>

#include "proxy/pipeline/frame_observer.h"
#include "proxy/pipeline/stage.h"

namespace kproxy::proxy {

class ObserverStage final : public Stage {
 public:
  explicit ObserverStage(std::shared_ptr<FrameObserver> observer) : observer_(or_no_observer(std::move(observer))) {}
  explicit ObserverStage(const StageSetup& setup) : ObserverStage(setup.observer) {}
  StageId id() const override { return StageId::kObserver; }
  void on_request(RequestContext& ctx) override { observer_->on_request(ctx); }
  void on_response(ResponseContext& ctx) override { observer_->on_response(ctx, ctx.latency()); }

 private:
  std::shared_ptr<FrameObserver> observer_;  ///< never null (or_no_observer)
};

}  // namespace kproxy::proxy
