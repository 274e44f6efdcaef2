#include "proxy/chaos/fault_stage.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "codec/generated/api_keys.h"
#include "codec/response_header.h"
#include "proxy/chaos/answer_builder.h"
#include "proxy/chaos/error_translation.h"
#include "proxy/chaos/fault_rule.h"
#include "proxy/chaos/rule_snapshot.h"
#include "proxy/cluster/topic_names.h"
#include "proxy/stage/frame_context.h"

namespace kproxy::chaos {

namespace {
/// What the stage remembers of an exchange from its request to its response.
struct FaultNote final : stage::ExchangeNote {
  std::vector<std::shared_ptr<const FaultRule>> error_rules;  ///< set these errors in the response
  std::optional<int32_t> throttle_ms;                         ///< set the response's throttle time
};
}  // namespace

FaultShaper* FaultStage::shaper(stage::Flow flow) {
  if (!shapers_) return nullptr;
  if (stage::ByteShaper* there = shapers_->installed(flow)) return dynamic_cast<FaultShaper*>(there);  // null: another stage's
  auto* made = static_cast<FaultShaper*>(
      shapers_->install(flow, std::make_unique<FaultShaper>(shapers_->loop(), services_.clock, shapers_->sink(flow))));
  if (flow == stage::Flow::kToClient) shapes_client_ = made != nullptr;
  return made;
}

std::chrono::milliseconds FaultStage::jittered(const RuleAction& a) {
  if (a.jitter.count() == 0) return a.delay;
  jitter_state_ ^= jitter_state_ << 13;
  jitter_state_ ^= jitter_state_ >> 7;
  jitter_state_ ^= jitter_state_ << 17;
  int64_t span = 2 * a.jitter.count() + 1;
  int64_t d = a.delay.count() - a.jitter.count() + static_cast<int64_t>(jitter_state_ % static_cast<uint64_t>(span));
  return std::chrono::milliseconds(std::max<int64_t>(0, d));
}

bool FaultStage::matches(const FaultRule& rule, const stage::RequestContext& ctx) const {
  const auto& header = ctx.header();
  if (!rule.matches_header(header.api_key, header.api_version, ctx.connection().listener, header.client_id)) return false;
  const auto& m = rule.match;
  if (!m.needs_body()) return true;
  auto body = ctx.message();
  if (!body) return false;  // cannot see the entities: no match
  bool txn = !m.transactional_id, topic = !m.topic, group = !m.group_id, part = m.partitions.empty(), pid = !m.producer_id;
  body->for_each_entity(header.api_version, [&](codec::EntityKind kind, std::string_view text, int64_t number) {
    switch (kind) {
      case codec::EntityKind::kTransactionalId: txn = txn || glob_match(*m.transactional_id, text); break;
      case codec::EntityKind::kTopicName: topic = topic || glob_match(*m.topic, text); break;
      case codec::EntityKind::kTopicId:  // KIP-516: the name learned from Metadata responses
        if (!topic) {
          auto name = services_.topic_names.name(text);
          topic = name && glob_match(*m.topic, *name);
        }
        break;
      case codec::EntityKind::kGroupId: group = group || glob_match(*m.group_id, text); break;
      case codec::EntityKind::kPartition:
        part = part || std::find(m.partitions.begin(), m.partitions.end(), static_cast<int32_t>(number)) != m.partitions.end();
        break;
      case codec::EntityKind::kProducerId: pid = pid || number == *m.producer_id; break;
    }
  });
  return txn && topic && group && part && pid;
}

bool FaultStage::applies(const FaultRule& rule, const stage::RequestContext& ctx) const {
  const auto& a = rule.action;
  // An answered request is not forwarded (no request-side effect, no broker response to edit);
  // the pipeline still applies the response-side transport actions to kproxy's own answer.
  const bool forwarded = !ctx.answered();
  const bool response = ctx.expects_response();
  switch (a.kind) {
    case ActionKind::kAnswer: {
      if (!forwarded || !response) return false;
      const auto& h = ctx.header();
      return ctx.message() != nullptr && answer_refusal(h.api_key, h.api_version).empty();
    }
    case ActionKind::kClose: return a.on_request || response;
    case ActionKind::kDelay: return a.on_request ? forwarded : response;
    case ActionKind::kError:
    case ActionKind::kThrottle: return forwarded && response;
    case ActionKind::kDropResponse: return response;
    case ActionKind::kResetAfterBytes: return response && shapers_;
    case ActionKind::kDuplicateRequest: return forwarded;
    case ActionKind::kBandwidth:
    case ActionKind::kSlice: return shapers_ && ((a.to_client && response) || (a.to_broker && forwarded));
  }
  return false;
}

void FaultStage::fired(const FaultRule& rule, const stage::RequestContext& ctx) {
  const auto& h = ctx.header();
  spdlog::debug("conn={} fault rule '{}' injects {} on {} v{} (correlation id {})", ctx.connection().id, rule.name,
                action_name(rule.action.kind), stage::api_label(h.api_key), h.api_version, h.correlation_id);
  services_.observer->on_fault_injected(stage::FaultEvent{rule, h.api_key, h.api_version, ctx.connection()});
}

void FaultStage::on_request(stage::RequestContext& ctx) {
  stage::ExchangeActions& actions = ctx.actions();
  // Blackholed: this exchange's answer (kproxy's own too) is swallowed like every later one.
  if (blackholed_ && ctx.expects_response()) actions.fate = stage::ResponseFate::kSwallow;
  if (ctx.answered() || ctx.closing()) return;
  const auto& header = ctx.header();
  const RuleSet& set = rules_.get();
  if (!set.may_match(header.api_key)) return;
  auto now = services_.clock.now();
  // Built as rules fire, handed to the exchange at the end (most exchanges need neither).
  std::shared_ptr<FaultNote> note;
  std::shared_ptr<FaultShape> to_client, to_broker;
  auto finish = [&] {
    if (note) actions.note = std::move(note);
    if (to_client) actions.to_client = std::move(to_client);
    if (to_broker) actions.to_broker = std::move(to_broker);
  };
  // Two passes: the rules that decide the request's fate (answer, close before forwarding) first,
  // in order, so the others are drawn knowing whether the request is forwarded.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& rule : set.rules) {
      const auto& a = rule->action;
      const bool decides = a.kind == ActionKind::kAnswer || (a.kind == ActionKind::kClose && a.on_request);
      if (decides != (pass == 0)) continue;
      if (pass == 0 && ctx.answered()) break;  // the first answer wins; a later close would destroy it
      if (!matches(*rule, ctx)) continue;
      if (!applies(*rule, ctx)) continue;
      if (!rule->fire(now)) continue;
      switch (a.kind) {
        case ActionKind::kAnswer: {
          auto request = ctx.message();
          auto response =
              request ? build_answer(*request, header.api_version, translate_error(header.api_key, header.api_version, a.error_code))
                      : nullptr;
          if (!response) {
            spdlog::warn("conn={} rule '{}': cannot answer {} v{}: {}", ctx.connection().id, rule->name, stage::api_label(header.api_key),
                         header.api_version, request ? "no builder" : ctx.decode_error());
            break;
          }
          ctx.answer(codec::encode_response_frame(header.correlation_id, codec::response_header_version(header.api_key, header.api_version),
                                                  *response, header.api_version));
          actions.injected_by = rule->name;
          fired(*rule, ctx);
          break;
        }
        case ActionKind::kClose:
          fired(*rule, ctx);
          if (a.on_request) {
            ctx.close({net::CloseCategory::kFault,
                       "fault rule '" + rule->name + "': close before forwarding " + stage::api_label(header.api_key)});
            return;
          }
          // The first close wins; a drop (swallow) keeps its place: a blackholed connection hangs.
          if (actions.fate == stage::ResponseFate::kDeliver) {
            actions.fate = stage::ResponseFate::kCloseInstead;
            actions.close_reason =
                "fault rule '" + rule->name + "': close after forwarding " + stage::api_label(header.api_key) + " (response withheld)";
          }
          break;
        case ActionKind::kDelay:
          fired(*rule, ctx);
          if (a.on_request) actions.request_delay = std::max(actions.request_delay, jittered(a));
          else actions.response_delay = std::max(actions.response_delay, jittered(a));
          break;
        case ActionKind::kError:
          fired(*rule, ctx);
          if (!note) note = std::make_shared<FaultNote>();
          note->error_rules.push_back(rule);
          if (actions.injected_by.empty()) actions.injected_by = rule->name;
          break;
        case ActionKind::kThrottle:
          fired(*rule, ctx);
          if (!note) note = std::make_shared<FaultNote>();
          note->throttle_ms = static_cast<int32_t>(a.throttle.count());
          break;
        case ActionKind::kDropResponse:
          fired(*rule, ctx);
          actions.fate = stage::ResponseFate::kSwallow;
          if (!blackholed_) {
            spdlog::info("conn={} fault rule '{}': the response to correlation id {} ({}) and every later one will be dropped (blackhole)",
                         ctx.connection().id, rule->name, header.correlation_id, stage::api_label(header.api_key));
          }
          blackholed_ = true;
          break;
        case ActionKind::kResetAfterBytes:
          if (!shaper(stage::Flow::kToClient)) break;
          fired(*rule, ctx);
          if (!to_client) to_client = std::make_shared<FaultShape>();
          to_client->reset_after_bytes = a.bytes;
          to_client->reset_rule = rule->name;
          break;
        case ActionKind::kDuplicateRequest:
          fired(*rule, ctx);
          actions.copies = 2;
          break;
        case ActionKind::kBandwidth:
        case ActionKind::kSlice: {
          // Several transport rules on one exchange combine (a slicer behind a bandwidth limit).
          auto add = [&](std::shared_ptr<FaultShape>& shape) {
            if (!shape) shape = std::make_shared<FaultShape>();
            if (!shape->toxic) shape->toxic.emplace();
            if (a.kind == ActionKind::kBandwidth) {
              shape->toxic->bytes_per_second = a.bytes;
            } else {
              shape->toxic->slice_bytes = a.bytes;
              shape->toxic->slice_delay = a.slice_delay;
            }
          };
          const bool down = a.to_client && ctx.expects_response(), up = a.to_broker && !ctx.answered();
          if ((down && !shaper(stage::Flow::kToClient)) || (up && !shaper(stage::Flow::kToBroker))) break;
          fired(*rule, ctx);
          if (down) add(to_client);
          if (up) add(to_broker);
          break;
        }
      }
    }
  }
  finish();
}

void FaultStage::on_response(stage::ResponseContext& ctx) {
  const auto& act = ctx.actions();
  if (shapes_client_ && !ctx.withheld()) {
    // A reset before this response's last byte: the client never sees it whole.
    const auto* shape = dynamic_cast<const FaultShape*>(act.to_client.get());
    const size_t size = ctx.frame().size();
    FaultShaper* shaper = this->shaper(stage::Flow::kToClient);
    auto budget = shaper ? shaper->reset_budget() : std::nullopt;
    if ((shape && shape->reset_after_bytes && size > *shape->reset_after_bytes) || (budget && size > *budget)) ctx.set_withheld(true);
  }
  if (ctx.synthetic() || !act.note) return;
  const auto* note = dynamic_cast<const FaultNote*>(act.note.get());
  if (!note) return;
  auto m = ctx.message();
  if (!m) {
    spdlog::warn("conn={} cannot inject into {} v{} response: {}", ctx.connection().id, stage::api_label(ctx.api_key()), ctx.api_version(),
                 ctx.decode_error());
    return;
  }
  for (const auto& rule : note->error_rules) {
    int16_t code = translate_error(ctx.api_key(), ctx.api_version(), rule->action.error_code);
    auto scope = rule->action.scope;
    const auto& match = rule->match;
    auto scoped_match = [&](const codec::ErrorScope& s) {
      if (!s.topic && !s.topic_id && !s.partition) return false;
      if (match.topic) {
        std::optional<std::string> by_id;
        if (!s.topic && s.topic_id) by_id = services_.topic_names.name(*s.topic_id);  // v13+ responses
        std::optional<std::string_view> name = s.topic ? s.topic : by_id ? std::optional<std::string_view>(*by_id) : std::nullopt;
        if (!(name && glob_match(*match.topic, *name))) return false;
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
        case ErrorScopeKind::kAll: set = true; break;
        case ErrorScopeKind::kTop: set = top == 0 || s.depth == 0; break;
        case ErrorScopeKind::kMatched: set = matched == 0 ? s.depth == 0 || top == 0 : scoped_match(s); break;
      }
      if (set) c = code;
    });
    ctx.mark_dirty(id());
  }
  if (note->throttle_ms && set_throttle_time(*m, ctx.body_version(), *note->throttle_ms)) ctx.mark_dirty(id());
}

}  // namespace kproxy::chaos
