// Stage: one named step of the pipeline that every request and response passes through.
//
// A stage looks at a frame through its context (proxy/pipeline/frame_context.h) and may decide something
// about it: answer a request itself, close the connection, delay or shape the exchange, change a
// response body (mark_dirty) or replace the whole frame. It never sends bytes and never talks to
// sockets: the pipeline (proxy/pipeline/pipeline.h) acts on what the stages decided, in order.
//
// The stages and their order are listed in one place, Pipeline's constructor (proxy/pipeline/pipeline.cc);
// adding a stage is a class in proxy/pipeline/stages/ plus one line there.
#pragma once

#include <cstdint>
#include <string_view>

namespace kproxy::proxy {

class RequestContext;
class ResponseContext;

/// Which stage did something to a frame (metrics label `stage`, log lines). One bit each in
/// ResponseContext::changed_by().
enum class StageId : uint8_t {
  kBrokerAddress,  ///< rewrites broker addresses so every connection stays on kproxy
  kApiVersions,    ///< KIP-511 client name, too-new ApiVersions answer, version range policy
  kTopicIds,       ///< learns topic id -> name from Metadata responses (KIP-516)
  kFaultRules,     ///< chaos: the admin API's and the config's fault rules
  kObserver,       ///< metrics and tap
};
inline constexpr size_t kStageCount = static_cast<size_t>(StageId::kObserver) + 1;

/// "broker_address", "api_versions", "topic_ids", "fault_rules", "observer".
std::string_view stage_name(StageId id);

class Stage {
 public:
  virtual ~Stage() = default;
  virtual StageId id() const = 0;
  /// A request on its way to the broker; stages see it in list order, each once.
  virtual void on_request(RequestContext&) {}
  /// A response on its way to the client (also kproxy's own answers: ResponseContext::synthetic()).
  virtual void on_response(ResponseContext&) {}
};

}  // namespace kproxy::proxy
