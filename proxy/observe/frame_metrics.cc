#include "proxy/observe/frame_metrics.h"

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/generated/messages/fetch.h"
#include "codec/generated/messages/produce.h"
#include "proxy/chaos/fault_rule.h"
#include "proxy/cluster/topic_names.h"
#include "proxy/metrics/label_values.h"
#include "proxy/observe/transaction_events.h"
#include "proxy/tap/tap_event.h"

namespace kproxy::observe {
namespace {

/// Client id of each connection seen on this thread while the tap is on (responses carry none).
/// Bounded: cleared when it grows past kMaxRemembered.
thread_local std::unordered_map<uint64_t, std::string> client_ids_seen;
constexpr size_t kMaxRemembered = 10000;

}  // namespace

FrameMetrics::FrameMetrics(metrics::ProxyMetrics& metrics, tap::TapHub& hub, const cluster::TopicNames& topic_names,
                           std::vector<std::string> listener_names, bool count_errors, bool track_transactions, const util::Clock& clock)
    : metrics_(metrics), hub_(hub), topic_names_(topic_names), listener_names_(std::move(listener_names)), count_errors_(count_errors),
      track_transactions_(track_transactions), transactions_(TransactionTracker::Limits{}, &topic_names, clock) {
  for (size_t i = 0; i < stage::kStageCount; ++i) stage_ids_[i] = metrics_.stage_id(stage::stage_name(static_cast<stage::StageId>(i)));
  // Transaction lifecycle events go to the tap's ?transactions subscribers, built only while
  // someone follows the tap.
  transactions_.set_event_hook(
      [this](const TxnEvent& e) {
        int16_t api = e.connection == 0 ? int16_t{-1} : txn_api_key(e.api);  // 0: ended by a timeout
        tap::TapEventMeta meta{api, false, e.connection, e.transaction.client_id, e.kind == TxnEvent::Kind::kError, true};
        if (!hub_.wants(meta)) return;
        hub_.publish(meta, transaction_event_line(e, transactions_.clock().now()));
      },
      [this] { return hub_.active(); });
}

void FrameMetrics::count_topics(const stage::RequestContext& ctx, metrics::LabelValues& topics) {
  const auto& h = ctx.header();
  auto message = ctx.message();
  if (!message) return;
  // Each topic a request names counts once, whether it names it by name or (KIP-516) by id.
  std::vector<std::string> named;
  auto add = [&](std::string_view topic) {
    if (topic.empty() || std::find(named.begin(), named.end(), topic) != named.end()) return;
    named.emplace_back(topic);
  };
  message->for_each_entity(h.api_version, [&](codec::EntityKind kind, std::string_view text, int64_t) {
    if (kind == codec::EntityKind::kTopicName) add(text);
  });
  auto by_id = [&](const codec::Uuid& id) {
    if (id == codec::Uuid{}) return;
    auto name = topic_names_.name(id);  // learned by the pipeline from Metadata responses
    add(name ? std::string_view(*name) : std::string_view("unknown_topic_id"));
  };
  if (h.api_key == static_cast<int16_t>(codec::ApiKey::kFetch) && h.api_version >= 13) {
    for (const auto& t : static_cast<const codec::FetchRequest&>(*message).topics) by_id(t.topic_id);
  } else if (h.api_key == static_cast<int16_t>(codec::ApiKey::kProduce) && h.api_version >= 13) {
    for (const auto& t : static_cast<const codec::ProduceRequest&>(*message).topic_data) by_id(t.topic_id);
  }
  for (const auto& t : named) topics.count(h.api_key, t);
}

void FrameMetrics::on_request(const stage::RequestContext& ctx) {
  const auto& h = ctx.header();
  metrics_.request(ctx.connection().listener_index, h.api_key, h.api_version, ctx.frame().size());
  // A request a rule closes the connection on before forwarding reaches no broker and gets no
  // answer: the client sends it again elsewhere, nothing happened to its transaction.
  if (track_transactions_ && !ctx.closing() && is_txn_api_key(h.api_key) &&
      (h.api_key != static_cast<int16_t>(codec::ApiKey::kProduce) || h.header_version < 0 ||
       produce_names_transaction(ctx.frame().subspan(codec::kFrameSizePrefix + h.size), h.api_version))) {
    // Only the transaction APIs and transactional Produce are decoded (a non-transactional Produce
    // costs a peek at its first field, here, inline).
    thread_local TxnRequest request;  // reused: its partition list keeps its memory
    if (txn_request(ctx, request)) transactions_.on_request(ctx.connection().id, h.correlation_id, request, transactions_.clock().now());
  }
  if (metrics::LabelValues* clients = metrics_.client_id_labels())
    clients->count(h.api_key, h.client_id ? *h.client_id : std::string_view());
  if (metrics::LabelValues* topics = metrics_.topic_labels()) count_topics(ctx, *topics);
  if (!hub_.active()) return;
  std::string_view client_id = h.client_id ? *h.client_id : std::string_view();
  if (client_ids_seen.size() > kMaxRemembered) client_ids_seen.clear();
  auto& remembered = client_ids_seen[ctx.connection().id];
  if (remembered != client_id) remembered.assign(client_id);
  tap::TapEventMeta meta{h.api_key, false, ctx.connection().id, client_id, false};
  if (!hub_.wants(meta)) return;
  hub_.publish(meta, tap::request_line(ctx, hub_.limits()));
}

void FrameMetrics::on_response(const stage::ResponseContext& ctx, std::chrono::nanoseconds latency) {
  size_t listener = ctx.connection().listener_index;
  int16_t api = ctx.api_key();
  metrics_.response(listener, api, ctx.api_version(), ctx.frame().size(), latency, !ctx.synthetic());
  if (track_transactions_ && is_txn_api_key(api)) {
    bool hand_in = transactions_.awaiting_responses();
    if (api == static_cast<int16_t>(codec::ApiKey::kProduce)) {
      // A Produce answer without error tells the tracker nothing, most of the time
      // (TransactionTracker::wants_clean_produce_answers); the scan is the broker-address stage's.
      const codec::ResponseScan* scan = ctx.dirty() || ctx.synthetic() ? nullptr : ctx.scan();
      bool clean = scan && !scan->errors_overflow && scan->error_count == 0;
      hand_in = !clean || transactions_.wants_clean_produce_answers();
    }
    if (hand_in) {
      if (auto correlation = response_correlation_id(ctx.frame()))
        transactions_.on_response(ctx.connection().id, *correlation, txn_response(ctx), transactions_.clock().now());
    }
  }
  // Each stage that changed the frame says so itself (ResponseContext::changed_by()).
  for (uint32_t bits = ctx.changed_by(); bits != 0; bits &= bits - 1)
    metrics_.rewritten(api, stage_ids_[static_cast<size_t>(__builtin_ctz(bits))]);
  bool has_error = false;
  if (!count_errors_ && !hub_.active()) return;
  // The scan (made once per frame, often already by the broker-address rewrite) describes the
  // original bytes; a body a stage changed, or one with more errors than a scan holds, is decoded.
  const codec::ResponseScan* scan = ctx.dirty() ? nullptr : ctx.scan();
  if (scan && !scan->errors_overflow) {
    for (size_t i = 0; i < scan->error_count; ++i) metrics_.response_error(api, scan->errors[i].code);
    has_error = scan->error_count > 0;
  } else if (auto message = ctx.message()) {
    message->for_each_error_code(ctx.body_version(), [&](int16_t& code, const codec::ErrorScope&) {
      if (code != 0) {
        metrics_.response_error(api, code);
        has_error = true;
      }
    });
  } else if (ctx.decode_failure() != stage::DecodeFailure::kMalformed) {
    metrics_.undecoded(api, codec::api_name(api) ? metrics::UndecodedReason::kUnknownVersion : metrics::UndecodedReason::kUnknownApi);
  } else {
    metrics_.decode_error(api, metrics::Direction::kResponse, metrics::DecodeErrorReason::kBody);
  }
  if (!hub_.active()) return;
  auto known = client_ids_seen.find(ctx.connection().id);
  std::string_view client_id = known == client_ids_seen.end() ? std::string_view() : std::string_view(known->second);
  tap::TapEventMeta meta{api, true, ctx.connection().id, client_id, has_error};
  if (!hub_.wants(meta)) return;
  hub_.publish(meta, tap::response_line(ctx, latency, client_id, hub_.limits()));
}

void FrameMetrics::on_response_withheld(uint64_t connection_id, int32_t correlation_id) {
  if (track_transactions_) transactions_.on_response_withheld(connection_id, correlation_id);
}

void FrameMetrics::on_connection_closed(uint64_t connection_id) {
  if (track_transactions_) transactions_.on_connection_closed(connection_id);
}

void FrameMetrics::on_fault_injected(const stage::FaultEvent& event) {
  metrics_.fault_injected(event.rule.name, event.api_key, chaos::action_name(event.rule.action.kind));
}

}  // namespace kproxy::observe
