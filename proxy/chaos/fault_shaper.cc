#include "proxy/chaos/fault_shaper.h"

namespace kproxy::chaos {

FaultShaper::FaultShaper(uv_loop_t* loop, const util::Clock& clock, stage::ShapedSink& sink)
    : sink_(sink), transport_(
                       loop, clock, [this](codec::Bytes b) { sink_.write(b); }, [this] { sink_.flush(); }) {}

void FaultShaper::shutdown() {
  stopped_ = true;
  transport_.shutdown();
}

void FaultShaper::send(codec::Bytes bytes, const stage::ShapeSpec* spec) {
  if (stopped_) return;
  const auto* shape = dynamic_cast<const FaultShape*>(spec);  // another stage's spec: not ours to read
  if (shape && shape->reset_after_bytes && !reset_budget_) {
    reset_budget_ = *shape->reset_after_bytes;  // counted from this exchange's first byte
    reset_rule_ = shape->reset_rule;
  }
  if (reset_budget_) {
    if (bytes.size() >= *reset_budget_) {
      transport_.send(bytes.subspan(0, *reset_budget_), nullptr);
      stopped_ = true;
      sink_.flush();
      sink_.close({net::CloseCategory::kFault, "fault rule '" + reset_rule_ + "': reset after the configured number of response bytes"},
                  /*reset=*/true);
      return;
    }
    *reset_budget_ -= bytes.size();
  }
  transport_.send(bytes, shape && shape->toxic ? &*shape->toxic : nullptr);
}

}  // namespace kproxy::chaos
