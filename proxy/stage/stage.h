// Stage: one named step of the pipeline that every request and response passes through.
//
// A stage looks at a frame through its context (proxy/stage/frame_context.h) and may decide something
// about it with one of the pipeline's generic results: answer a request itself, close before
// forwarding, hold the request or the response, send the request more than once, swallow the
// response or close in its place, change a response body (mark_dirty) or replace the whole frame,
// and shape a direction's bytes through a ByteShaper it installs (proxy/stage/byte_shaper.h).
// It never talks to sockets: the pipeline (proxy/pipeline/pipeline.h) carries the results out, in
// order. What a result is for (a fault, a policy) is the stage's business, not the framework's.
//
// The stages and their order are one table, KPROXY_STAGES below: StageId, stage_name(),
// kStageCount, the Pipeline's members, their construction and the order frames pass them all
// derive from it. This layer names the stages but knows none: each stage is a class in the
// library of its domain (the fault and ApiVersions-policy stages in proxy/chaos/, broker_address
// and topic_ids in proxy/cluster/, the observer in proxy/observe/), and the pipeline
// (proxy/pipeline/pipeline.h) is the one place that includes them all and calls them by static
// dispatch. Adding a stage is a class in its domain's folder (a constructor that takes the
// StageSetup, the on_request / on_response it needs and, when it cares about a few APIs only,
// the wants_request / wants_response that name them), one row here, its source file in that
// folder's CMakeLists.txt and its header in pipeline.h.
//
// A stage is called only for the APIs it wants: the pipeline looks the frame's API key up in
// StageRoutes (one bit per stage, made once per process from every stage's wants_*), so a
// Produce request passes two stages (fault_rules, observer), not five.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

// What StageSetup hands the stages of the layers above (a name only: this layer includes neither).
namespace kproxy::chaos {
class RuleSnapshot;
}
namespace kproxy::cluster {
class BrokerAddressRewrite;
}

namespace kproxy::stage {

/// The stages in the order frames pass them: X(StageId enumerator, metric label `stage`, class).
#define KPROXY_STAGES(X)                                                                                    \
  X(kBrokerAddress, "broker_address", cluster::BrokerAddressStage) /* keeps every connection on kproxy */   \
  X(kApiVersions, "api_versions", chaos::ApiVersionsStage)         /* KIP-511 name, version range policy */ \
  X(kTopicIds, "topic_ids", cluster::TopicIdsStage)                /* topic id -> name from Metadata */     \
  X(kFaultRules, "fault_rules", chaos::FaultStage)                 /* the config's and admin API's rules */ \
  X(kObserver, "observer", observe::ObserverStage)                 /* metrics and tap */

/// Which stage did something to a frame (metrics label `stage`, log lines). One bit each in
/// ResponseContext::changed_by().
enum class StageId : uint8_t {
#define KPROXY_STAGE_ID(id, name, type) id,
  KPROXY_STAGES(KPROXY_STAGE_ID)
#undef KPROXY_STAGE_ID
};
#define KPROXY_STAGE_ONE(id, name, type) +1
inline constexpr size_t kStageCount = 0 KPROXY_STAGES(KPROXY_STAGE_ONE);
#undef KPROXY_STAGE_ONE

/// "broker_address", "api_versions", "topic_ids", "fault_rules", "observer".
std::string_view stage_name(StageId id);

/// One bit per stage (bit i: the stage whose StageId is i).
using StageMask = uint8_t;
static_assert(kStageCount <= 8 * sizeof(StageMask), "StageMask has a bit per stage");

/// Which stages a request / a response of an API passes: every stage's wants_request /
/// wants_response, asked once per API key. An API key outside Kafka's table passes every stage.
/// The process's routes are pipeline::stage_routes() (proxy/pipeline/pipeline.h), the layer that
/// includes every stage.
struct StageRoutes {
  static constexpr size_t kApiKeys = 128;  ///< table size; Kafka 4.4's highest key is below it
  std::array<StageMask, kApiKeys> request{};
  std::array<StageMask, kApiKeys> response{};

  StageMask for_request(int16_t api_key) const { return in_table(api_key) ? request[static_cast<size_t>(api_key)] : kEvery; }
  StageMask for_response(int16_t api_key) const { return in_table(api_key) ? response[static_cast<size_t>(api_key)] : kEvery; }

 private:
  static constexpr StageMask kEvery = static_cast<StageMask>((1u << kStageCount) - 1);
  static bool in_table(int16_t api_key) { return api_key >= 0 && static_cast<size_t>(api_key) < kApiKeys; }
};

class RequestContext;
class ResponseContext;
class FrameObserver;
class ShaperPort;
struct Services;

/// Where a newly numbered broker is announced (the connection, which asks the proxy to listen).
class BrokerPortOpener {
 public:
  virtual ~BrokerPortOpener() = default;
  virtual void open_broker_port(int32_t node_id, uint16_t port) = 0;
};

/// What the pipeline hands every stage it makes; each takes what it needs.
struct StageSetup {
  chaos::RuleSnapshot& rules;                    ///< the connection's view of the fault rules and policy
  const cluster::BrokerAddressRewrite& rewrite;  ///< the listener's broker addresses
  BrokerPortOpener& port_opener;                 ///< the connection
  const Services& services;                      ///< the process's: metrics, topic names, the frame observer, the clock
  uint64_t connection_id;
  ShaperPort& shapers;  ///< where a stage installs a byte shaper (proxy/stage/byte_shaper.h)
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual StageId id() const = 0;
  /// The APIs whose requests / responses the stage looks at (StageRoutes). A stage that acts on a
  /// few APIs hides these with its own; the default is every API.
  static bool wants_request(int16_t /*api_key*/) { return true; }
  static bool wants_response(int16_t /*api_key*/) { return true; }
  /// A request on its way to the broker; stages see it in list order, each once.
  virtual void on_request(RequestContext&) {}
  /// A response on its way to the client (also kproxy's own answers: ResponseContext::synthetic()).
  virtual void on_response(ResponseContext&) {}
};

}  // namespace kproxy::stage
