#include "proxy/pipeline/pipeline.h"

#include <algorithm>
#include <cassert>

#include <spdlog/spdlog.h>

#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/response_header.h"
#include "proxy/metrics/connection_metrics.h"
#include "proxy/metrics/proxy_metrics.h"
#include "proxy/stage/request_fields.h"

namespace kproxy::pipeline {

/// One request that gets an answer (from the broker or from a stage), in request order.
struct Pipeline::Slot {
  enum class Kind : uint8_t {
    kKafka,      ///< forwarded (or to be): the broker answers with a Kafka response
    kSaslToken,  ///< a raw SASL token after SaslHandshake v0: its answer is a raw token too
    kSynthetic,  ///< answered by a stage: bytes ready from the start
    kDiscarded,  ///< an extra copy of a request (ExchangeActions::copies): its answer goes nowhere
  };
  Kind kind = Kind::kKafka;
  int16_t api_key = -1;
  int16_t api_version = -1;
  int32_t correlation_id = 0;
  int8_t response_header_version = -1;  ///< -1 for APIs or versions kproxy does not know
  bool ready = false;                   ///< bytes (or the drop/close decision) are known
  std::chrono::steady_clock::time_point sent_at{};
  std::chrono::steady_clock::time_point release_at{};
  std::vector<uint8_t> bytes;
  /// What the stages decided for the response, when anything (ExchangeActions::affect_response()):
  /// most exchanges have nothing, and a slot without it is a fifth of the size.
  std::unique_ptr<stage::ExchangeActions> actions;
};

namespace {
/// `actions` on the heap when they affect the response, else nothing.
std::unique_ptr<stage::ExchangeActions> keep_if_any(stage::ExchangeActions&& actions) {
  if (!actions.affect_response()) return nullptr;
  return std::make_unique<stage::ExchangeActions>(std::move(actions));
}
}  // namespace

struct Pipeline::HeldRequest {
  std::vector<uint8_t> frame;
  bool expects_response = true;
  std::chrono::steady_clock::time_point release_at;
  std::shared_ptr<const stage::ShapeSpec> shape;  ///< for the broker direction's shaper
};

Pipeline::Pipeline(uv_loop_t* loop, const chaos::LiveRules& chaos, const cluster::BrokerAddressRewrite& rewrite, stage::ConnectionInfo info,
                   PipelineOutput& output, metrics::ConnectionMetrics& metrics, const stage::Services& services)
    // rules_ is referred to here before it is made: the stages keep the reference, use it later.
    : Pipeline(loop, chaos, std::move(info), output, metrics, stage::StageSetup{rules_, rewrite, output, services, info.id, *this}) {}

Pipeline::Pipeline(uv_loop_t* loop, const chaos::LiveRules& chaos, stage::ConnectionInfo info, PipelineOutput& output,
                   metrics::ConnectionMetrics& metrics, const stage::StageSetup& setup)
    : info_(std::move(info)), loop_(loop), clock_(setup.services.clock), output_(output), metrics_(metrics), rules_(chaos),
#define KPROXY_STAGE_INIT(id, name, type) id##_(setup),
      KPROXY_STAGES(KPROXY_STAGE_INIT)
#undef KPROXY_STAGE_INIT
          sasl_() {
}

const stage::StageRoutes& stage_routes() {
  static const stage::StageRoutes routes = [] {
    stage::StageRoutes r;
    for (size_t api = 0; api < stage::StageRoutes::kApiKeys; ++api) {
      auto key = static_cast<int16_t>(api);
#define KPROXY_STAGE_ROUTE(id, name, type)                                                                                      \
  if (type::wants_request(key)) r.request[api] |= static_cast<stage::StageMask>(1u << static_cast<size_t>(stage::StageId::id)); \
  if (type::wants_response(key)) r.response[api] |= static_cast<stage::StageMask>(1u << static_cast<size_t>(stage::StageId::id));
      KPROXY_STAGES(KPROXY_STAGE_ROUTE)
#undef KPROXY_STAGE_ROUTE
    }
    return r;
  }();
  return routes;
}

Pipeline::~Pipeline() { shutdown(); }

void Pipeline::release_idle_memory() { slots_.release_if_empty(); }

void Pipeline::shutdown() {
  // Answers the observer saw as delivered that a delay still holds: the client never gets them.
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.kind != Slot::Kind::kSaslToken && s.ready && !s.bytes.empty()) kObserver_.response_withheld(s.correlation_id);
  }
  closed_ = true;
  if (timer_) timer_->cancel();
  while (awaiting_broker_ > 0) {
    metrics_.response_popped();
    --awaiting_broker_;
  }
  slots_.clear();
  held_.clear();
  forwarded_ahead_ = answered_ahead_ = awaiting_broker_ = 0;
  held_request_bytes_ = held_response_bytes_ = 0;
  if (shaping_ && shaping_->to_client) shaping_->to_client->shutdown();
  if (shaping_ && shaping_->to_broker) shaping_->to_broker->shutdown();
}

stage::ShapedSink& Pipeline::sink(stage::Flow flow) {
  if (!shaping_) shaping_ = std::make_unique<Shaping>(*this);
  return flow == stage::Flow::kToClient ? shaping_->client : shaping_->broker;
}

stage::ByteShaper* Pipeline::install(stage::Flow flow, std::unique_ptr<stage::ByteShaper> shaper) {
  if (!shaping_) shaping_ = std::make_unique<Shaping>(*this);
  std::unique_ptr<stage::ByteShaper>& slot = flow == stage::Flow::kToClient ? shaping_->to_client : shaping_->to_broker;
  if (slot) return nullptr;
  slot = std::move(shaper);
  return slot.get();
}

stage::ByteShaper* Pipeline::installed(stage::Flow flow) {
  if (!shaping_) return nullptr;
  return (flow == stage::Flow::kToClient ? shaping_->to_client : shaping_->to_broker).get();
}

void Pipeline::Sink::write(codec::Bytes bytes) {
  if (pipeline.closed_) return;
  if (flow == stage::Flow::kToClient) pipeline.output_.send_to_client(bytes);
  else pipeline.output_.send_to_broker(bytes);
}

void Pipeline::Sink::flush() {
  if (!pipeline.closed_) pipeline.output_.flush();
}

void Pipeline::Sink::close(net::CloseReason reason, bool reset) {
  if (pipeline.closed_) return;
  pipeline.closed_ = true;
  if (reset && flow == stage::Flow::kToClient) pipeline.output_.reset_client();
  pipeline.output_.close(std::move(reason));
}

void Pipeline::send_broker(codec::Bytes bytes, const stage::ShapeSpec* shape) {
  if (shaping_ && shaping_->to_broker) shaping_->to_broker->send(bytes, shape);
  else output_.send_to_broker(bytes);  // nothing shapes this direction: no hop through a shaper
}

void Pipeline::send_client(codec::Bytes bytes, const stage::ShapeSpec* shape) {
  if (closed_) return;
  if (shaping_ && shaping_->to_client) shaping_->to_client->send(bytes, shape);
  else output_.send_to_client(bytes);
}

void Pipeline::close(net::CloseReason reason) {
  closed_ = true;
  output_.close(std::move(reason));
}

bool Pipeline::may_stream_request(codec::Bytes head) {
  if (closed_ || sasl_.active() || !held_.empty() || (shaping_ && shaping_->to_broker) || head.size() < codec::kFrameSizePrefix)
    return false;
  codec::RequestHeader header;
  if (!codec::read_request_header(head.subspan(codec::kFrameSizePrefix), header, nullptr) || header.header_version < 0) return false;
  switch (static_cast<codec::ApiKey>(header.api_key)) {
    case codec::ApiKey::kApiVersions:  // the ApiVersions stage may answer it
    case codec::ApiKey::kSaslHandshake:
    case codec::ApiKey::kSaslAuthenticate: return false;
    default: break;
  }
  return !rules_.get().may_match(header.api_key);
}

bool Pipeline::on_request_frame(codec::Bytes frame, std::chrono::steady_clock::time_point now, bool streamed) {
  if (closed_) return false;
  codec::Bytes message = frame.subspan(codec::kFrameSizePrefix);
  if (sasl_.active()) {
    codec::RequestHeader probe;
    bool parses = codec::read_request_header(message, probe, nullptr) && probe.header_version >= 0;
    if (sasl_.is_raw_token(parses)) {
      metrics_.count(metrics::ProxyEvent::kSaslRawToken);
      bool answered = sasl_.tokens_are_answered();
      if (answered) {
        Slot slot;
        slot.kind = Slot::Kind::kSaslToken;
        slots_.push_back(std::move(slot));
      } else {
        unanswered_sasl_tokens_ = true;
      }
      if (!held_.empty()) hold(frame, answered, std::chrono::milliseconds(0), nullptr, now);  // keeps its place behind a delay
      else forward(frame, answered, nullptr, now);
      return true;
    }
  }
  codec::RequestHeader header;
  std::string error;
  if (!codec::read_request_header(message, header, &error)) {
    metrics_.count(metrics::ProxyEvent::kMalformedRequest);
    close({net::CloseCategory::kClientProtocolError, "malformed request header: " + error});
    return false;
  }
  unanswered_sasl_tokens_ = false;
  bool expects_response = true;
  if (header.header_version < 0) {
    metrics_.count(metrics::ProxyEvent::kRequestUnknownVersion);
    spdlog::debug("conn={} forwarding api key {} ({}) v{} untouched: unknown to kproxy", info_.id, header.api_key,
                  stage::api_label(header.api_key), header.api_version);
  } else {
    codec::Bytes body = message.subspan(header.size);
    if (header.api_key == static_cast<int16_t>(codec::ApiKey::kProduce)) {
      auto acks = stage::produce_request_acks(body, header.api_version);
      if (!acks) {
        metrics_.count(metrics::ProxyEvent::kMalformedRequest);
        close({net::CloseCategory::kClientProtocolError,
               "malformed ProduceRequest v" + std::to_string(header.api_version) + ": body too short for TransactionalId and Acks"});
        return false;
      }
      if (*acks == 0) {
        expects_response = false;  // the broker sends nothing back (docs/protocol.md "Produce acks=0")
        metrics_.count(metrics::ProxyEvent::kRequestWithoutResponse);
      }
    } else if (header.api_key == static_cast<int16_t>(codec::ApiKey::kSaslHandshake) && header.api_version == 0) {
      auto mechanism = stage::sasl_handshake_mechanism(body);
      if (!mechanism) {
        metrics_.count(metrics::ProxyEvent::kMalformedRequest);
        close({net::CloseCategory::kClientProtocolError, "malformed SaslHandshakeRequest v0"});
        return false;
      }
      spdlog::debug("conn={} SaslHandshake v0 ({}): raw SASL tokens follow", info_.id, *mechanism);
      sasl_.begin(*mechanism);
    }
  }

  stage::RequestContext ctx(header, frame, info_, expects_response);
  for_each_stage(stage_routes().for_request(header.api_key), [&](auto& stage) {
    stage.on_request(ctx);
    return true;
  });
  if (header.api_key == static_cast<int16_t>(codec::ApiKey::kApiVersions)) {
    metrics_.client_software(info_.client_software_name(), info_.client_software_version());  // set by the ApiVersions stage
  }
  if (ctx.closing()) {
    close(std::move(*ctx.close_reason()));
    return false;
  }

  stage::ExchangeActions& actions = ctx.actions();
  if (streamed && (ctx.answered() || actions.request_delay.count() > 0 || actions.to_broker || actions.copies > 1 || !held_.empty())) {
    // Only a fault rule added while the frame arrived gets here (may_stream_request refused
    // every other case): its start is at the broker already, so it can be neither answered,
    // delayed nor shaped. Closing is what a broken connection mid-request looks like.
    close({net::CloseCategory::kFault, std::string("a fault rule added while a large ") + stage::api_label(header.api_key) +
                                           " request was being forwarded acts on it before forwarding; its start was already sent"});
    return false;
  }
  Slot slot;
  slot.api_key = header.api_key;
  slot.api_version = header.api_version;
  slot.correlation_id = header.correlation_id;
  slot.response_header_version = static_cast<int8_t>(codec::response_header_version(header.api_key, header.api_version));
  if (ctx.answered()) {
    slot.kind = Slot::Kind::kSynthetic;
    slot.ready = true;
    slot.bytes = std::move(ctx.answer_frame());
    held_response_bytes_ += slot.bytes.size();
    slot.release_at = now + actions.response_delay;
    // The response side of the exchange still applies to kproxy's own answer; the request side
    // does not (nothing is forwarded).
    stage::ExchangeActions answer_actions = std::move(actions);
    answer_actions.request_delay = std::chrono::milliseconds(0);
    answer_actions.copies = 1;
    answer_actions.to_broker.reset();
    stage::ResponseContext rctx(header.api_key, header.api_version, slot.response_header_version,
                                codec::Bytes(slot.bytes.data(), slot.bytes.size()), info_, answer_actions, /*synthetic=*/true,
                                std::chrono::nanoseconds(0));
    rctx.set_withheld(response_withheld(slots_.size(), answer_actions));
    for_each_stage(stage_routes().for_response(header.api_key), [&](auto& stage) {
      stage.on_response(rctx);
      return true;
    });
    slot.actions = keep_if_any(std::move(answer_actions));
    slots_.push_back(std::move(slot));
    pump(now);
    return !closed_;
  }
  std::shared_ptr<const stage::ShapeSpec> shape = std::move(actions.to_broker);
  std::chrono::milliseconds request_delay = actions.request_delay;
  // More than one copy: the broker gets the request again, as after a client's retry; each extra
  // answer has a slot of its own right behind the first's, and is discarded there.
  const int extra_copies = actions.copies - 1;
  if (expects_response) {
    slot.actions = keep_if_any(std::move(actions));
    slots_.push_back(std::move(slot));
    if (extra_copies > 0) [[unlikely]]
      push_discarded_copies(extra_copies);
  }
  if (request_delay.count() > 0 || !held_.empty()) {
    hold(frame, expects_response, request_delay, shape, now);
    if (extra_copies > 0) [[unlikely]]
      send_copies(extra_copies, frame, expects_response, shape, now);
    return true;
  }
  // Straight on, unless a shaper takes it: its residence is measured when the connection has
  // written this read (ConnectionMetrics::residence_written).
  if (!shaping_ || !shaping_->to_broker) metrics_.forwarded(metrics::Direction::kRequest, header.api_key);
  forward(frame, expects_response, shape.get(), now);
  if (extra_copies > 0) [[unlikely]]
    send_copies(extra_copies, frame, expects_response, shape, now);
  return true;
}

void Pipeline::send_copies(int count, codec::Bytes frame, bool expects_response, const std::shared_ptr<const stage::ShapeSpec>& shape,
                           std::chrono::steady_clock::time_point now) {
  // Behind the held requests when there are any (the original among them), else at once.
  for (int c = 0; c < count; ++c) {
    if (!held_.empty()) hold(frame, expects_response, std::chrono::milliseconds(0), shape, now);
    else forward(frame, expects_response, shape.get(), now);
  }
}

void Pipeline::push_discarded_copies(int count) {
  // The original's slot is the last one; read before a push may move the ring.
  const Slot& original = slots_.back();
  const int16_t api_key = original.api_key, api_version = original.api_version;
  const int32_t correlation_id = original.correlation_id;
  const int8_t response_header_version = original.response_header_version;
  for (int c = 0; c < count; ++c) {
    Slot copy;
    copy.kind = Slot::Kind::kDiscarded;
    copy.api_key = api_key;
    copy.api_version = api_version;
    copy.correlation_id = correlation_id;
    copy.response_header_version = response_header_version;
    slots_.push_back(std::move(copy));
  }
}

void Pipeline::hold(codec::Bytes frame, bool expects_response, std::chrono::milliseconds delay,
                    const std::shared_ptr<const stage::ShapeSpec>& shape, std::chrono::steady_clock::time_point now) {
  HeldRequest h;
  h.frame.assign(frame.begin(), frame.end());
  h.expects_response = expects_response;
  h.release_at = std::max(now + delay, held_.empty() ? now : held_.back().release_at);
  h.shape = shape;
  held_request_bytes_ += h.frame.size();
  held_.push_back(std::move(h));
  arm_timer(held_.front().release_at);
}

void Pipeline::forward(codec::Bytes frame, bool expects_response, const stage::ShapeSpec* shape,
                       std::chrono::steady_clock::time_point now) {
  if (expects_response) {
    size_t i = forwarded_ahead_;
    while (i < slots_.size() && slots_[i].kind == Slot::Kind::kSynthetic) ++i;
    assert(i < slots_.size());  // every request that expects an answer got its slot first
    slots_[i].sent_at = now;
    forwarded_ahead_ = i + 1;
    ++awaiting_broker_;
    metrics_.request_pushed();
  }
  send_broker(frame, shape);
}

bool Pipeline::on_response_frame(codec::Bytes frame, std::chrono::steady_clock::time_point now) {
  if (closed_) return false;
  size_t i = answered_ahead_;
  while (i < forwarded_ahead_ && slots_[i].kind == Slot::Kind::kSynthetic) ++i;
  if (i >= forwarded_ahead_) {
    if (unanswered_sasl_tokens_) {
      send_client(frame);
      return true;
    }
    metrics_.count(metrics::ProxyEvent::kUnexpectedResponse);
    close({net::CloseCategory::kBrokerProtocolError, "broker sent a response with no request in flight"});
    return false;
  }
  answered_ahead_ = i + 1;
  --awaiting_broker_;
  metrics_.response_popped();
  Slot& slot = slots_[i];
  slot.ready = true;
  if (slot.kind == Slot::Kind::kSaslToken) {
    if (i == 0) {
      pop_front_slot();
      send_client(frame);
    } else {
      slot.bytes.assign(frame.begin(), frame.end());
      held_response_bytes_ += slot.bytes.size();
      slot.release_at = now;
    }
    pump(now);
    return !closed_;
  }
  codec::Bytes message = frame.subspan(codec::kFrameSizePrefix);
  if (message.size() < 4) {
    metrics_.count(metrics::ProxyEvent::kMalformedResponse);
    close({net::CloseCategory::kBrokerProtocolError,
           "response of " + std::to_string(message.size()) + " bytes to " + stage::api_label(slot.api_key) + " has no correlation id"});
    return false;
  }
  int32_t correlation_id = codec::peek_response_correlation_id(message);
  if (correlation_id != slot.correlation_id) {
    metrics_.count(metrics::ProxyEvent::kCorrelationMismatch);
    close({net::CloseCategory::kBrokerProtocolError, "correlation id mismatch: expected " + std::to_string(slot.correlation_id) + " (" +
                                                         stage::api_label(slot.api_key) + " v" + std::to_string(slot.api_version) +
                                                         "), broker sent " + std::to_string(correlation_id)});
    return false;
  }
  if (slot.kind == Slot::Kind::kDiscarded) {
    // The answer to an extra copy of a request: the client asked once and gets one answer (the
    // first); the stages and observers saw the exchange already.
    slot.release_at = now;
    pump(now);
    return !closed_;
  }
  // Stages only read the actions; an exchange without any sees an empty set.
  stage::ExchangeActions none;
  stage::ExchangeActions& actions = slot.actions ? *slot.actions : none;
  stage::ResponseContext ctx(slot.api_key, slot.api_version, slot.response_header_version, frame, info_, actions, /*synthetic=*/false,
                             std::chrono::duration_cast<std::chrono::nanoseconds>(now - slot.sent_at));
  ctx.set_withheld(response_withheld(i, actions));
  bool closing = !for_each_stage(stage_routes().for_response(slot.api_key), [&](auto& stage) {
    stage.on_response(ctx);
    return !ctx.closing();
  });
  if (closing) {
    close(std::move(*ctx.close_reason()));
    return false;
  }
  slot.release_at = now + actions.response_delay;
  if (i == 0 && !ctx.dirty() && !actions.affect_response()) {
    // Fast path: in order, nothing to hold: the bytes go out without a copy (the broker's own,
    // or the broker-address stage's rewrite).
    if (!shaping_ || !shaping_->to_client) metrics_.forwarded(metrics::Direction::kResponse, slot.api_key);
    pop_front_slot();
    send_client(ctx.frame());
    pump(now);
    return !closed_;
  }
  slot.bytes = ctx.encode();
  held_response_bytes_ += slot.bytes.size();
  pump(now);
  return !closed_;
}

void Pipeline::pump(std::chrono::steady_clock::time_point now) {
  if (closed_) return;
  while (!held_.empty() && held_.front().release_at <= now) {
    HeldRequest h = std::move(held_.front());
    held_.pop_front();
    held_request_bytes_ -= h.frame.size();
    forward(codec::Bytes(h.frame.data(), h.frame.size()), h.expects_response, h.shape.get(), now);
  }
  held_.release_if_empty();  // delay rules are rare: give the queue back
  while (!slots_.empty() && slots_.front().ready) {
    Slot& s = slots_.front();
    if (s.release_at > now) break;
    if (s.kind == Slot::Kind::kDiscarded || (s.actions && s.actions->fate == stage::ResponseFate::kSwallow)) {
      pop_front_slot();
      continue;
    }
    if (s.actions && s.actions->fate == stage::ResponseFate::kCloseInstead) {
      closed_ = true;
      output_.flush();
      output_.close({net::CloseCategory::kFault, s.actions->close_reason});
      return;
    }
    std::vector<uint8_t> bytes = std::move(s.bytes);
    std::shared_ptr<const stage::ShapeSpec> shape = s.actions ? s.actions->to_client : nullptr;
    held_response_bytes_ -= bytes.size();
    s.bytes.clear();
    pop_front_slot();
    send_client(codec::Bytes(bytes.data(), bytes.size()), shape.get());
    if (closed_) return;
  }
  std::optional<std::chrono::steady_clock::time_point> next;
  if (!held_.empty()) next = held_.front().release_at;
  if (!slots_.empty() && slots_.front().ready && (!next || slots_.front().release_at < *next)) next = slots_.front().release_at;
  if (next) arm_timer(*next);
}

bool Pipeline::response_withheld(size_t index, const stage::ExchangeActions& own) const {
  if (own.fate != stage::ResponseFate::kDeliver) return true;
  for (size_t j = 0; j < index && j < slots_.size(); ++j) {
    const stage::ExchangeActions* a = slots_[j].actions.get();
    if (a && a->fate == stage::ResponseFate::kCloseInstead) return true;  // the connection closes before this one
  }
  return false;
}

void Pipeline::pop_front_slot() {
  held_response_bytes_ -= slots_.front().bytes.size();
  slots_.pop_front();
  if (forwarded_ahead_ > 0) --forwarded_ahead_;
  if (answered_ahead_ > 0) --answered_ahead_;
}

void Pipeline::arm_timer(std::chrono::steady_clock::time_point at) {
  if (closed_) return;
  if (!timer_) {
    // Only delays and held SASL answers need the timer: made on first use.
    timer_ = std::make_unique<net::DeadlineTimer>(loop_, clock_, [this] {
      pump();
      if (!closed_) output_.flush();
    });
  }
  timer_->arm(at);
}

}  // namespace kproxy::pipeline
