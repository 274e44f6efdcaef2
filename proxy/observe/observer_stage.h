// ObserverStage: the last stage. Hands every request (as it leaves, or is answered by kproxy)
// and every response (as it goes to the client) to the process's FrameObserver: metrics and the
// tap (proxy/observe/frame_metrics.h). Observers change nothing.
#pragma once

#include <memory>

#include "proxy/stage/frame_observer.h"
#include "proxy/stage/services.h"
#include "proxy/stage/stage.h"

namespace kproxy::observe {

class ObserverStage final : public stage::Stage {
 public:
  explicit ObserverStage(std::shared_ptr<stage::FrameObserver> observer, uint64_t connection_id = 0)
      : observer_(stage::or_no_observer(std::move(observer))), connection_id_(connection_id) {}
  explicit ObserverStage(const stage::StageSetup& setup) : ObserverStage(setup.services.observer, setup.connection_id) {}
  /// The pipeline, and with it the connection, is gone.
  ~ObserverStage() override { observer_->on_connection_closed(connection_id_); }
  ObserverStage(const ObserverStage&) = delete;
  ObserverStage& operator=(const ObserverStage&) = delete;
  stage::StageId id() const override { return stage::StageId::kObserver; }
  void on_request(stage::RequestContext& ctx) override { observer_->on_request(ctx); }
  void on_response(stage::ResponseContext& ctx) override { observer_->on_response(ctx, ctx.latency()); }
  /// The pipeline closes with this answer, observed as delivered, still held (FrameObserver).
  void response_withheld(int32_t correlation_id) { observer_->on_response_withheld(connection_id_, correlation_id); }

 private:
  std::shared_ptr<stage::FrameObserver> observer_;  ///< never null (or_no_observer)
  uint64_t connection_id_;
};

}  // namespace kproxy::observe
