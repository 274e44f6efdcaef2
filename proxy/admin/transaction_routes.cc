#include "proxy/admin/transaction_routes.h"

#include <chrono>
#include <optional>
#include <string>

#include "codec/generated/error_code.h"
#include "proxy/util/utf8.h"

namespace kproxy::admin {

namespace {

/// The longest transactional.id the path may name (docs/admin-api.openapi.yaml).
constexpr size_t kMaxIdLength = 1024;

/// The most ended transactions GET /transactions?ended=N lists.
constexpr size_t kMaxEnded = 1000;

/// `?ended=N`: decimal digits only, 0..kMaxEnded.
std::optional<size_t> parse_ended(const std::string& text) {
  if (text.empty() || text.size() > 4) return std::nullopt;
  size_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  if (n > kMaxEnded) return std::nullopt;
  return n;
}

/// Every outcome's count since start: the ended ones by outcome, and `open` now.
nlohmann::json outcome_counts(const observe::TransactionStats& stats) {
  nlohmann::json out = nlohmann::json::object();
  for (auto outcome : {observe::TxnOutcome::kCommitted, observe::TxnOutcome::kAborted, observe::TxnOutcome::kFenced,
                       observe::TxnOutcome::kTimedOut, observe::TxnOutcome::kUnknown}) {
    auto it = stats.ended.find(outcome);
    out[std::string(observe::txn_outcome_name(outcome))] = it == stats.ended.end() ? 0 : it->second;
  }
  out["open"] = stats.open;
  return out;
}

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

nlohmann::json error_json(const observe::TxnError& e, observe::TxnClock::time_point now) {
  const char* name = codec::error_name(e.error_code);
  return {{"api", std::string(observe::txn_api_name(e.api))},
          {"error", name ? name : std::to_string(e.error_code)},
          {"injected_by", e.injected_by.empty() ? nlohmann::json() : nlohmann::json(e.injected_by)},
          {"broker_error", !e.broker_error_code                      ? nlohmann::json()
                           : codec::error_name(*e.broker_error_code) ? nlohmann::json(codec::error_name(*e.broker_error_code))
                                                                     : nlohmann::json(std::to_string(*e.broker_error_code))},
          {"seconds_ago", seconds(now - e.at)}};
}

}  // namespace

nlohmann::json transaction_json(const observe::TransactionRecord& t, observe::TxnClock::time_point now) {
  nlohmann::json partitions = nlohmann::json::array();
  for (const auto& p : t.partitions) partitions.push_back({{"topic", p.topic}, {"partition", p.partition}});
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& e : t.errors) errors.push_back(error_json(e, now));
  nlohmann::json out = {
      {"transactional_id", t.transactional_id},
      {"producer_id", t.producer_id},
      {"producer_epoch", t.producer_epoch},
      {"transaction_version", t.transaction_version},
      {"outcome", std::string(observe::txn_outcome_name(t.outcome))},
      {"listener", t.listener},
      {"client_id", t.client_id},
      {"client_software", t.client_software},
      {"started_seconds_ago", seconds(now - t.begin)},
      {"duration_seconds", seconds(t.duration(now))},
      {"partitions", partitions},
      {"partitions_dropped", t.partitions_dropped},
      {"groups", t.groups},
      {"records", t.records},
      {"bytes", t.bytes},
      {"retries", t.retries},
      {"errors", errors},
      {"errors_dropped", t.errors_dropped},
      {"cause", t.cause ? error_json(*t.cause, now) : nlohmann::json()},
      {"fenced_by", t.fenced_by_epoch >= 0 ? nlohmann::json{{"producer_id", t.fenced_by_producer_id}, {"producer_epoch", t.fenced_by_epoch}}
                                           : nlohmann::json()},
      {"last_error", t.errors.empty() ? nlohmann::json() : error_json(t.errors.back(), now)},
      {"sequence", t.sequence},
      {"end_acknowledged", t.end_acknowledged},
      {"end_retries", t.end_retries},
  };
  return out;
}

void register_transaction_routes(AdminServer& server, std::shared_ptr<observe::TransactionTracker> tracker) {
  server.route("GET", "/transactions", [tracker](const HttpRequest& r) {
    std::optional<size_t> ended;
    if (auto it = r.query_params.find("ended"); it != r.query_params.end()) {
      ended = parse_ended(it->second);
      if (!ended) return json_error(400, "ended: expected a whole number from 0 to " + std::to_string(kMaxEnded));
    }
    auto now = tracker->clock().now();
    tracker->sweep(now);
    nlohmann::json list = nlohmann::json::array();
    for (const auto& t : tracker->open_transactions()) list.push_back(transaction_json(t, now));
    nlohmann::json body = {{"count", list.size()}, {"transactions", std::move(list)}};
    if (ended) {
      nlohmann::json recent = nlohmann::json::array();
      for (const auto& t : tracker->recent_ended(*ended)) recent.push_back(transaction_json(t, now));
      body["ended"] = std::move(recent);
      body["outcomes"] = outcome_counts(tracker->stats(now));
    }
    return HttpResponse{200, "application/json", body.dump() + "\n"};
  });
  server.route("GET", "/transactions/{transactional_id}", [tracker](const HttpRequest& r) {
    const std::string& id = r.path_params.at("transactional_id");
    if (util::code_points(id) > kMaxIdLength)
      return json_error(400, "transactional_id: longer than " + std::to_string(kMaxIdLength) + " characters");
    auto now = tracker->clock().now();
    tracker->sweep(now);
    auto history = tracker->history(id);
    if (history.empty()) return json_error(404, "no transactions seen for transactional.id '" + id + "'");
    nlohmann::json list = nlohmann::json::array();
    for (const auto& t : history) list.push_back(transaction_json(t, now));
    nlohmann::json body = {{"transactional_id", id}, {"transactions", std::move(list)}};
    return HttpResponse{200, "application/json", body.dump() + "\n"};
  });
}

}  // namespace kproxy::admin
