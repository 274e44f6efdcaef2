// ObserverStage: hands every frame to the process's FrameObserver, and tells it when the
// connection's pipeline is gone.
#include "proxy/observe/observer_stage.h"

#include <doctest/doctest.h>

#include <vector>

using namespace kproxy;

namespace {

struct Closings final : stage::FrameObserver {
  std::vector<uint64_t> closed;
  void on_connection_closed(uint64_t connection_id) override { closed.push_back(connection_id); }
};

}  // namespace

TEST_CASE("observer stage: the observer hears of the connection's close once, when the stage goes") {
  auto observer = std::make_shared<Closings>();
  {
    observe::ObserverStage stage(observer, 42);
    CHECK(observer->closed.empty());
  }
  CHECK(observer->closed == std::vector<uint64_t>{42});
  { observe::ObserverStage without(nullptr, 7); }  // the do-nothing observer: nothing to hear, no crash
  CHECK(observer->closed == std::vector<uint64_t>{42});
}
