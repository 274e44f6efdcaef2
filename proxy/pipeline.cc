#include "proxy/pipeline.h"

#include <algorithm>
#include <mutex>

#include <spdlog/spdlog.h>

#include "codec/generated/api_keys.h"
#include "codec/api_versions.h"
#include "codec/frame_reader.h"
#include "codec/generated/messages/api_versions.h"
#include "codec/response_header.h"
#include "codec/writer.h"
#include "proxy/chaos/answer_builder.h"
#include "proxy/chaos/error_translation.h"
#include "proxy/topic_names.h"

namespace kproxy::proxy {

namespace {
constexpr int16_t kApiVersionsKey = 18;
constexpr int16_t kMetadataKey = 3;

std::mutex observer_mutex;
std::shared_ptr<FrameObserver> observer_instance;

const char* api_label(int16_t api_key) {
  const char* n = codec::api_name(api_key);
  return n ? n : "unknown-api";
}
}  // namespace

void set_frame_observer(std::shared_ptr<FrameObserver> observer) {
  std::lock_guard lock(observer_mutex);
  observer_instance = std::move(observer);
}

std::shared_ptr<FrameObserver> frame_observer() {
  std::lock_guard lock(observer_mutex);
  return observer_instance;
}

// ---- contexts ----

std::shared_ptr<codec::Message> RequestContext::message() const {
  if (decoded_) return message_;
  decoded_ = true;
  if (header_.header_version < 0) {
    decode_error_ = "version unknown to kproxy";
    return nullptr;
  }
  auto m = codec::make_request(header_.api_key);
  if (!m) {
    decode_error_ = "api key unknown to kproxy";
    return nullptr;
  }
  codec::Bytes body = frame_.subspan(codec::kFrameSizePrefix + header_.size);
  codec::Reader r(body);
  m->read(r, header_.api_version);
  if (!r.ok()) {
    decode_error_ = r.error();
    return nullptr;
  }
  message_ = std::shared_ptr<codec::Message>(std::move(m));
  return message_;
}

std::shared_ptr<codec::Message> ResponseContext::message() const {
  if (decoded_) return message_;
  decoded_ = true;
  codec::ResponseHeader h;
  codec::Bytes after_prefix = frame_.subspan(codec::kFrameSizePrefix);
  if (header_version_ < 0 || !codec::read_response_header(after_prefix, header_version_, h, &decode_error_)) {
    if (decode_error_.empty()) decode_error_ = "version unknown to kproxy";
    return nullptr;
  }
  codec::Bytes body = after_prefix.subspan(h.size);
  if (api_key_ == kApiVersionsKey) {
    auto av = std::make_shared<codec::ApiVersionsResponse>();
    int16_t v = codec::decode_api_versions_response(body, api_version_, *av, &decode_error_);
    if (v < 0) return nullptr;
    const_cast<ResponseContext*>(this)->body_version_ = v;
    message_ = av;
    return message_;
  }
  auto m = codec::make_response(api_key_);
  if (!m) {
    decode_error_ = "api key unknown to kproxy";
    return nullptr;
  }
  codec::Reader r(body);
  m->read(r, api_version_);
  if (!r.ok()) {
    decode_error_ = r.error();
    return nullptr;
  }
  const_cast<ResponseContext*>(this)->body_version_ = api_version_;
  message_ = std::shared_ptr<codec::Message>(std::move(m));
  return message_;
}

const codec::ResponseScan* ResponseContext::scan() const {
  if (scanned_) return scan_;
  scanned_ = true;
  codec::ResponseHeader h;
  codec::Bytes after_prefix = frame_.subspan(codec::kFrameSizePrefix);
  if (header_version_ < 0 || !codec::read_response_header(after_prefix, header_version_, h, nullptr)) return nullptr;
  if (!codec::scan_response(api_key_, api_version_, after_prefix.subspan(h.size), own_scan_.emplace())) {
    own_scan_.reset();
    return nullptr;
  }
  scan_ = &*own_scan_;
  return scan_;
}

std::vector<uint8_t> ResponseContext::encode() const {
  if (!dirty_ || !message_) return std::vector<uint8_t>(frame_.begin(), frame_.end());
  codec::ResponseHeader h;
  codec::Bytes after_prefix = frame_.subspan(codec::kFrameSizePrefix);
  codec::read_response_header(after_prefix, header_version_, h, nullptr);
  size_t body_size = message_->size(body_version_);
  std::vector<uint8_t> out;
  out.reserve(codec::kFrameSizePrefix + h.size + body_size);
  codec::Writer w(out);
  w.int32(static_cast<int32_t>(h.size + body_size));  // patched size prefix
  w.raw(after_prefix.subspan(0, h.size));             // the header as the broker sent it
  message_->write(w, body_version_);
  return out;
}

// ---- pipeline state ----

struct Pipeline::ResponseActions {
  std::vector<std::shared_ptr<const chaos::FaultRule>> error_rules;
  std::optional<int32_t> throttle_ms;
  std::chrono::milliseconds delay{0};
  bool drop = false;
  bool close_after = false;
  std::optional<uint64_t> reset_after_bytes;
  std::optional<chaos::TransportToxic> toxic;  ///< bandwidth / slice of the response
  bool any() const { return !error_rules.empty() || throttle_ms || delay.count() > 0 || drop || close_after || reset_after_bytes || toxic; }
};

struct Pipeline::Slot {
  int32_t correlation_id = 0;
  int16_t api_key = -1;
  bool synthetic = false;
  bool ready = false;  ///< bytes (or the drop/close decision) are known
  std::vector<uint8_t> bytes;
  std::chrono::steady_clock::time_point release_at{};
  ResponseActions actions;
};

struct Pipeline::HeldRequest {
  std::vector<uint8_t> frame;
  codec::RequestHeader header;  ///< views cleared: only api key, version, correlation id are used
  bool expects_response = true;
  std::chrono::steady_clock::time_point release_at;
  std::optional<chaos::TransportToxic> toxic;  ///< bandwidth / slice of the request
};

Pipeline::Pipeline(uv_loop_t* loop, const chaos::ChaosControl& chaos, ConnectionInfo info, Sink sink)
    : chaos_(chaos), observer_(frame_observer()), info_(std::move(info)), sink_(std::move(sink)),
      timer_(loop, [this] {
        pump();
        if (!closed_) sink_.flush();
      }),
      jitter_state_(0x9e3779b97f4a7c15ULL ^ info_.id),
      to_client_(loop, [this](codec::Bytes b) { sink_.send_client(b); }, [this] { sink_.flush(); }),
      to_broker_(loop, [this](codec::Bytes b) { sink_.send_broker(b); }, [this] { sink_.flush(); }) {}

Pipeline::~Pipeline() { shutdown(); }

void Pipeline::shutdown() {
  closed_ = true;
  timer_.cancel();
  slots_.clear();
  held_.clear();
  held_request_bytes_ = held_response_bytes_ = 0;
  to_client_.shutdown();
  to_broker_.shutdown();
}

void Pipeline::send_broker(codec::Bytes bytes) {
  if (closed_) return;
  to_broker_.send(bytes, request_toxic_ ? &*request_toxic_ : nullptr);
  request_toxic_.reset();
}

const chaos::RuleSet& Pipeline::rules() {
  uint64_t g = chaos_.generation();
  if (g != generation_ || !rules_) {
    rules_ = chaos_.current();
    generation_ = g;
  }
  return *rules_;
}

std::chrono::milliseconds Pipeline::jittered(const chaos::RuleAction& a) {
  if (a.jitter.count() == 0) return a.delay;
  jitter_state_ ^= jitter_state_ << 13;
  jitter_state_ ^= jitter_state_ >> 7;
  jitter_state_ ^= jitter_state_ << 17;
  int64_t span = 2 * a.jitter.count() + 1;
  int64_t d = a.delay.count() - a.jitter.count() + static_cast<int64_t>(jitter_state_ % static_cast<uint64_t>(span));
  return std::chrono::milliseconds(std::max<int64_t>(0, d));
}

bool Pipeline::matches(const chaos::FaultRule& rule, const codec::RequestHeader& header, RequestContext& ctx) const {
  if (!rule.matches_header(header.api_key, header.api_version, info_.listener, header.client_id)) return false;
  const auto& m = rule.match;
  if (!m.needs_body()) return true;
  auto body = ctx.message();
  if (!body) return false;  // cannot see the entities: no match
  bool txn = !m.transactional_id, topic = !m.topic, group = !m.group_id, part = m.partitions.empty(), pid = !m.producer_id;
  body->for_each_entity(header.api_version, [&](codec::EntityKind kind, std::string_view text, int64_t number) {
    switch (kind) {
      case codec::EntityKind::kTransactionalId: txn = txn || chaos::glob_match(*m.transactional_id, text); break;
      case codec::EntityKind::kTopicName: topic = topic || chaos::glob_match(*m.topic, text); break;
      case codec::EntityKind::kTopicId:  // KIP-516: the name learned from Metadata responses
        if (!topic) {
          auto name = TopicNames::shared().name(text);
          topic = name && chaos::glob_match(*m.topic, *name);
        }
        break;
      case codec::EntityKind::kGroupId: group = group || chaos::glob_match(*m.group_id, text); break;
      case codec::EntityKind::kPartition:
        part = part || std::find(m.partitions.begin(), m.partitions.end(), static_cast<int32_t>(number)) != m.partitions.end();
        break;
      case codec::EntityKind::kProducerId: pid = pid || number == *m.producer_id; break;
    }
  });
  return txn && topic && group && part && pid;
}

void Pipeline::fired(const chaos::FaultRule& rule, const codec::RequestHeader& header) {
  spdlog::debug("conn={} fault rule '{}' injects {} on {} v{} (correlation id {})", info_.id, rule.name, chaos::action_name(rule.action.kind),
                api_label(header.api_key), header.api_version, header.correlation_id);
  if (observer_) observer_->on_fault_injected(FaultEvent{rule, header.api_key, header.api_version, info_});
}

RequestVerdict Pipeline::on_request(const codec::RequestHeader& header, codec::Bytes frame, bool expects_response) {
  RequestContext ctx(header, frame, info_);
  const chaos::RuleSet& set = rules();
  ResponseActions actions;
  std::chrono::milliseconds request_delay{0};
  std::optional<chaos::TransportToxic> request_toxic;
  std::vector<uint8_t> synthetic;
  bool answered = false;

  if (header.api_key == kApiVersionsKey && header.header_version >= 0) {
    if (header.api_version >= 3) {
      if (auto m = ctx.message()) {
        const auto& av = static_cast<const codec::ApiVersionsRequest&>(*m);
        info_.client_software_name = std::string(av.client_software_name);
        info_.client_software_version = std::string(av.client_software_version);
      }
    }
  } else if (header.api_key == kApiVersionsKey && header.api_version > codec::request_versions(kApiVersionsKey).max) {
    // Newer than kproxy decodes: answer as the broker would, clients retry lower (PROTOCOL.md 8).
    synthetic = chaos::unsupported_api_versions_frame(header.correlation_id);
    answered = true;
  }

  if (!answered && set.may_match(header.api_key)) {
    auto now = std::chrono::steady_clock::now();
    for (const auto& rule : set.rules) {
      if (!matches(*rule, header, ctx)) continue;
      if (!rule->fire(now)) continue;
      const auto& a = rule->action;
      switch (a.kind) {
        case chaos::ActionKind::kAnswer: {
          if (answered || !expects_response) break;
          auto request = ctx.message();
          auto response = request ? chaos::build_answer(*request, header.api_version, chaos::translate_error(header.api_key, header.api_version, a.error_code))
                                  : nullptr;
          if (!response) {
            spdlog::warn("conn={} rule '{}': cannot answer {} v{}: {}", info_.id, rule->name, api_label(header.api_key), header.api_version,
                         request ? "no builder" : ctx.decode_error());
            break;
          }
          synthetic = chaos::encode_response_frame(header.correlation_id, codec::response_header_version(header.api_key, header.api_version), *response,
                                                   header.api_version);
          answered = true;
          fired(*rule, header);
          break;
        }
        case chaos::ActionKind::kClose:
          fired(*rule, header);
          if (a.on_request) {
            close_reason_ = "fault rule '" + rule->name + "': close before forwarding " + api_label(header.api_key);
            if (observer_) observer_->on_request(ctx);
            return RequestVerdict::kClose;
          }
          actions.close_after = true;
          break;
        case chaos::ActionKind::kDelay:
          fired(*rule, header);
          if (a.on_request) request_delay = std::max(request_delay, jittered(a));
          else actions.delay = std::max(actions.delay, jittered(a));
          break;
        case chaos::ActionKind::kError:
          fired(*rule, header);
          actions.error_rules.push_back(rule);
          break;
        case chaos::ActionKind::kThrottle:
          fired(*rule, header);
          actions.throttle_ms = static_cast<int32_t>(a.throttle.count());
          break;
        case chaos::ActionKind::kDropResponse:
          fired(*rule, header);
          actions.drop = true;
          break;
        case chaos::ActionKind::kResetAfterBytes:
          fired(*rule, header);
          actions.reset_after_bytes = a.bytes;
          break;
        case chaos::ActionKind::kBandwidth:
        case chaos::ActionKind::kSlice: {
          fired(*rule, header);
          // Several transport rules on one exchange combine (a slicer behind a bandwidth limit).
          auto add = [&](std::optional<chaos::TransportToxic>& t) {
            if (!t) t.emplace();
            if (a.kind == chaos::ActionKind::kBandwidth) {
              t->bytes_per_second = a.bytes;
            } else {
              t->slice_bytes = a.bytes;
              t->slice_delay = a.slice_delay;
            }
          };
          if (a.to_client) add(actions.toxic);
          if (a.to_broker) add(request_toxic);
          break;
        }
      }
    }
  }
  if (observer_) observer_->on_request(ctx);

  auto now = std::chrono::steady_clock::now();
  if (answered) {
    Slot slot;
    slot.correlation_id = header.correlation_id;
    slot.api_key = header.api_key;
    slot.synthetic = true;
    slot.ready = true;
    slot.bytes = std::move(synthetic);
    held_response_bytes_ += slot.bytes.size();
    slot.release_at = now + actions.delay;
    slot.actions.drop = actions.drop;
    slot.actions.close_after = actions.close_after;
    slot.actions.reset_after_bytes = actions.reset_after_bytes;
    slot.actions.toxic = actions.toxic;
    if (observer_) {
      ResponseContext rctx(header.api_key, header.api_version, codec::response_header_version(header.api_key, header.api_version),
                           codec::Bytes(slot.bytes.data(), slot.bytes.size()), info_);
      rctx.synthetic_ = true;
      observer_->on_response(rctx, std::chrono::nanoseconds(0));
    }
    slots_.push_back(std::move(slot));
    pump();
    return RequestVerdict::kAnswered;
  }
  if (expects_response) {
    Slot slot;
    slot.correlation_id = header.correlation_id;
    slot.api_key = header.api_key;
    slot.actions = std::move(actions);
    slots_.push_back(std::move(slot));
  }
  if (request_delay.count() > 0 || !held_.empty()) {
    HeldRequest h;
    h.frame.assign(frame.begin(), frame.end());
    h.header = header;
    h.header.client_id.reset();
    h.header.tagged_fields.clear();
    h.expects_response = expects_response;
    h.release_at = std::max(now + request_delay, held_.empty() ? now : held_.back().release_at);
    h.toxic = request_toxic;
    held_request_bytes_ += h.frame.size();
    held_.push_back(std::move(h));
    arm_timer(held_.front().release_at);
    return RequestVerdict::kHeld;
  }
  request_toxic_ = request_toxic;  // for the send_broker() the forward that follows makes
  return RequestVerdict::kForward;
}

void Pipeline::apply_response_actions(Slot& slot, ResponseContext& ctx) {
  const auto& act = slot.actions;
  if (act.error_rules.empty() && !act.throttle_ms) return;
  auto m = ctx.message();
  if (!m) {
    spdlog::warn("conn={} cannot inject into {} v{} response: {}", info_.id, api_label(ctx.api_key()), ctx.api_version(), ctx.decode_error());
    return;
  }
  for (const auto& rule : act.error_rules) {
    int16_t code = chaos::translate_error(ctx.api_key(), ctx.api_version(), rule->action.error_code);
    auto scope = rule->action.scope;
    const auto& match = rule->match;
    auto scoped_match = [&](const codec::ErrorScope& s) {
      if (!s.topic && !s.topic_id && !s.partition) return false;
      if (match.topic) {
        std::optional<std::string> by_id;
        if (!s.topic && s.topic_id) by_id = TopicNames::shared().name(*s.topic_id);  // v13+ responses
        std::optional<std::string_view> name = s.topic ? s.topic : by_id ? std::optional<std::string_view>(*by_id) : std::nullopt;
        if (!(name && chaos::glob_match(*match.topic, *name))) return false;
      }
      if (!match.partitions.empty() &&
          !(s.partition && std::find(match.partitions.begin(), match.partitions.end(), *s.partition) != match.partitions.end()))
        return false;
      return true;
    };
    size_t top = 0, matched = 0;
    m->for_each_error_code(ctx.body_version(), [&](int16_t&, const codec::ErrorScope& s) {
      top += s.depth == 0 ? 1 : 0;
      matched += scoped_match(s) ? 1 : 0;
    });
    m->for_each_error_code(ctx.body_version(), [&](int16_t& c, const codec::ErrorScope& s) {
      bool set = false;
      switch (scope) {
        case chaos::ErrorScopeKind::kAll: set = true; break;
        case chaos::ErrorScopeKind::kTop: set = top == 0 || s.depth == 0; break;
        case chaos::ErrorScopeKind::kMatched: set = matched == 0 ? s.depth == 0 || top == 0 : scoped_match(s); break;
      }
      if (set) c = code;
    });
    ctx.mark_dirty();
  }
  if (act.throttle_ms && chaos::set_throttle_time(*m, ctx.body_version(), *act.throttle_ms)) ctx.mark_dirty();
}

void Pipeline::on_response(int16_t api_key, int16_t api_version, int header_version, codec::Bytes frame,
                           std::chrono::steady_clock::time_point sent_at, const codec::ResponseScan* scan) {
  if (closed_) return;
  auto it = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.synthetic && !s.ready; });
  if (it == slots_.end()) {  // no slot (should not happen): pass through
    send_client(frame);
    return;
  }
  Slot& slot = *it;
  auto now = std::chrono::steady_clock::now();
  ResponseContext ctx(api_key, api_version, header_version, frame, info_);
  ctx.adopt_scan(scan);
  if (api_key == kApiVersionsKey) {
    if (auto m = ctx.message()) {
      if (chaos::rewrite_api_versions(static_cast<codec::ApiVersionsResponse&>(*m), rules().api_versions)) {
        ctx.mark_dirty();
      }
    } else {
      spdlog::debug("conn={} ApiVersions response not decoded ({}): forwarded as is", info_.id, ctx.decode_error());
    }
  }
  if (api_key == kMetadataKey) {
    // Topic ids -> names, for `topic:` rules and the topic label on requests that name topics by id
    // (proxy/topic_names.h).
    if (auto m = ctx.message()) learn_topic_ids(*m, ctx.body_version(), TopicNames::shared());
  }
  apply_response_actions(slot, ctx);
  if (observer_) observer_->on_response(ctx, std::chrono::duration_cast<std::chrono::nanoseconds>(now - sent_at));
  slot.ready = true;
  slot.release_at = now + slot.actions.delay;
  bool plain = !slot.actions.any() && !ctx.dirty();
  if (plain && &slot == &slots_.front() && !blackholed_) {
    // Fast path: in order, nothing to hold: the original bytes go out without a copy.
    pop_front_slot();
    send_client(frame);
    pump();
    return;
  }
  slot.bytes = ctx.encode();
  held_response_bytes_ += slot.bytes.size();
  pump();
}

void Pipeline::send_client(codec::Bytes bytes, const chaos::TransportToxic* toxic) {
  if (closed_) return;
  if (reset_budget_) {
    if (bytes.size() >= *reset_budget_) {
      to_client_.send(bytes.subspan(0, *reset_budget_), nullptr);
      reset_budget_.reset();
      close_reason_ = "fault rule: reset after the configured number of response bytes";
      closed_ = true;
      sink_.flush();
      if (sink_.reset_client) sink_.reset_client();
      sink_.close(close_reason_);
      return;
    }
    *reset_budget_ -= bytes.size();
  }
  to_client_.send(bytes, toxic);
}

void Pipeline::pump() {
  if (closed_) return;
  auto now = std::chrono::steady_clock::now();
  while (!held_.empty() && held_.front().release_at <= now) {
    HeldRequest h = std::move(held_.front());
    held_.pop_front();
    held_request_bytes_ -= h.frame.size();
    request_toxic_ = h.toxic;
    sink_.forward_request(codec::Bytes(h.frame.data(), h.frame.size()), h.header, h.expects_response);
    request_toxic_.reset();
  }
  held_.release_if_empty();  // delay rules are rare: give the queue back
  while (!slots_.empty() && slots_.front().ready) {
    Slot& s = slots_.front();
    if (s.release_at > now) break;
    if (blackholed_) {
      pop_front_slot();
      continue;
    }
    if (s.actions.drop) {
      spdlog::info("conn={} dropping the response to correlation id {} ({}) and every later one (blackhole)", info_.id, s.correlation_id,
                   api_label(s.api_key));
      blackholed_ = true;
      pop_front_slot();
      continue;
    }
    if (s.actions.close_after) {
      close_reason_ = std::string("fault rule: close after forwarding ") + api_label(s.api_key) + " (response withheld)";
      closed_ = true;
      sink_.flush();
      sink_.close(close_reason_);
      return;
    }
    if (s.actions.reset_after_bytes && !reset_budget_) reset_budget_ = *s.actions.reset_after_bytes;
    Slot sent_slot = take_front_slot();
    const auto& toxic = sent_slot.actions.toxic;
    send_client(codec::Bytes(sent_slot.bytes.data(), sent_slot.bytes.size()), toxic ? &*toxic : nullptr);
    if (closed_) return;
  }
  std::optional<std::chrono::steady_clock::time_point> next;
  if (!held_.empty()) next = held_.front().release_at;
  if (!slots_.empty() && slots_.front().ready && (!next || slots_.front().release_at < *next)) next = slots_.front().release_at;
  if (next) arm_timer(*next);
}

Pipeline::Slot Pipeline::take_front_slot() {
  Slot s = std::move(slots_.front());
  held_response_bytes_ -= s.bytes.size();
  slots_.pop_front();
  return s;
}

void Pipeline::pop_front_slot() {
  held_response_bytes_ -= slots_.front().bytes.size();
  slots_.pop_front();
}

void Pipeline::arm_timer(std::chrono::steady_clock::time_point at) {
  if (!closed_) timer_.arm(at);
}

}  // namespace kproxy::proxy
