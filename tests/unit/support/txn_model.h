// A reference model for the transaction tracker's model-based test and fuzz target: a
// transaction coordinator per transactional.id (transaction.version 1 or 2, KIP-890), a producer
// that runs transactions against it the way Kafka's clients do (retrying what a lost answer or a
// retriable error leaves unknown), and kproxy's fault actions between them. The producer's own
// account of each transaction (what it learnt in the end) is what the tracker must reproduce.
//
// What the tracker is handed goes through a TxnSink: the unit test hands it to the frame
// observer as encoded frames (tests/unit/proxy/observe/transaction_tracker_model_test.cc), the
// fuzz target straight to the tracker (tests/fuzz/txn_model_fuzzer.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codec/generated/error_code.h"
#include "proxy/observe/transaction_tracker.h"

namespace kproxy::testing::txn_model {

using observe::TxnApi;
using observe::TxnOutcome;

constexpr int16_t code(codec::ErrorCode e) { return static_cast<int16_t>(e); }

/// What kproxy does to one exchange (docs/faults.md): nothing, or one fault action.
enum class Fault : uint8_t {
  kNone,
  kLost,                ///< drop_response / close_after: the broker answered, the client never sees it
  kHeldThenClosed,      ///< a delay held the answer and the client's connection closed meanwhile
  kCloseBefore,         ///< close before forwarding: the broker never sees the request
  kRewrittenRetriable,  ///< an error rule: the broker's answer, with a retriable error for the client
  kAnsweredRetriable,   ///< kproxy answers with a retriable error: the broker never sees it
  kAnsweredRefusal,     ///< kproxy answers AddPartitionsToTxn with TOPIC_AUTHORIZATION_FAILED
  /// EndTxn only: the client sends it again before the first answer came (its own request
  /// timeout; a delay held the first on its way): both reach the coordinator, in order.
  kSentTwice,
  kCount,
};

/// One request as the client sends it.
struct Exchange {
  TxnApi api = TxnApi::kProduce;
  int16_t version = 0;
  uint64_t connection = 0;
  int32_t correlation_id = 0;
  std::string transactional_id;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  bool commit = false;
  int32_t records = 0;
};

/// An answer: what the broker said (-1 when kproxy answered instead), what the client is sent.
struct Answer {
  int16_t broker_code = 0;
  int16_t client_code = 0;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
};

/// Where the exchanges go (the frame observer, or the tracker itself).
class TxnSink {
 public:
  virtual ~TxnSink() = default;
  /// The request passed kproxy's stages under `fault` (kCloseBefore: the connection closes on it;
  /// kAnswered*: kproxy answers it).
  virtual void request(const Exchange& x, Fault fault) = 0;
  /// Its answer reached the observer (withheld from the client for kLost).
  virtual void response(const Exchange& x, Fault fault, const Answer& a) = 0;
  /// The answer observed as delivered never reached the client (kHeldThenClosed).
  virtual void withheld(uint64_t connection, int32_t correlation_id) = 0;
  virtual void closed(uint64_t connection) = 0;
};

/// The coordinator (and partition leaders) of one transactional.id: Kafka's
/// TransactionCoordinator as far as a producer's requests see it.
struct Coordinator {
  bool tv2 = false;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  enum class State : uint8_t { kEmpty, kOngoing, kCompleteCommit, kCompleteAbort } state = State::kEmpty;

  Answer ok() const { return {0, 0, -1, -1}; }
  Answer error(codec::ErrorCode e) const { return {code(e), code(e), -1, -1}; }
  bool current(const Exchange& x) const { return x.producer_id == producer_id && x.producer_epoch == producer_epoch; }

  Answer answer(const Exchange& x) {
    using E = codec::ErrorCode;
    switch (x.api) {
      case TxnApi::kInitProducerId:
        // A new instance (or the same asking again): the epoch goes up, what was open is aborted.
        if (producer_id < 0) producer_id = 4000;
        ++producer_epoch;
        if (state == State::kOngoing) state = State::kCompleteAbort;
        return {0, 0, producer_id, producer_epoch};
      case TxnApi::kAddPartitionsToTxn:
      case TxnApi::kProduce:
        if (!current(x)) return error(x.api == TxnApi::kProduce ? E::kInvalidProducerEpoch : E::kProducerFenced);
        state = State::kOngoing;
        return ok();
      case TxnApi::kEndTxn: {
        const State done = x.commit ? State::kCompleteCommit : State::kCompleteAbort;
        if (tv2) {
          if (current(x) && state == State::kOngoing) {
            state = done;
            ++producer_epoch;  // KIP-890: a new epoch per transaction
            return {0, 0, producer_id, producer_epoch};
          }
          // A retry of the end it made with the epoch before (KIP-890): answered alike.
          if (x.producer_id == producer_id && x.producer_epoch == producer_epoch - 1 && state == done)
            return {0, 0, producer_id, producer_epoch};
          if (!current(x)) return error(E::kProducerFenced);
          return error(E::kInvalidTxnState);
        }
        if (!current(x)) return error(E::kProducerFenced);
        if (state == State::kOngoing) {
          state = done;
          return ok();
        }
        if (state == done) return ok();  // transaction.version 1: a retried end of a completed one
        return error(E::kInvalidTxnState);
      }
      default: return ok();
    }
  }
};

/// A random or fuzzer-driven source of choices.
using Choose = std::function<uint32_t(uint32_t bound)>;  ///< a value in [0, bound)

/// A transactional producer and what it knows.
class Producer {
 public:
  Producer(bool tv2, std::string id, Coordinator& coordinator, TxnSink& sink, Choose choose, uint32_t fault_percent)
      : tv2_(tv2), id_(std::move(id)), coordinator_(coordinator), sink_(sink), choose_(std::move(choose)), fault_percent_(fault_percent) {}

  /// The client's own account: each transaction's outcome as it learnt it, in order.
  const std::vector<TxnOutcome>& account() const { return account_; }
  int fencings() const { return fencings_; }

  void init() {
    Exchange x = make(TxnApi::kInitProducerId, 4);
    Answer a = call(x, /*coordinator=*/true, /*refusable=*/false);
    producer_id_ = a.producer_id;
    producer_epoch_ = a.producer_epoch;
  }

  /// One transaction: partitions (TV1), records, then commit or abort; or a refusal; or a new
  /// instance of the id that fences it.
  void transaction() {
    if (!tv2_) {
      // The first AddPartitionsToTxn may be refused: nothing at the coordinator yet, so the client
      // aborts without EndTxn (Kafka's TransactionManager).
      Exchange add = make(TxnApi::kAddPartitionsToTxn, 3);
      Answer a = call(add, true, /*refusable=*/true);
      if (a.client_code == code(codec::ErrorCode::kTopicAuthorizationFailed)) {
        account_.push_back(TxnOutcome::kAborted);
        return;
      }
    }
    Exchange produce = make(TxnApi::kProduce, 9);
    produce.records = 1 + static_cast<int32_t>(choose_(5));
    call(produce, false, false);
    if (choose_(100) < 8) {
      // A new instance of the same transactional.id: the coordinator fences this one (KIP-98).
      Producer fresh(tv2_, id_, coordinator_, sink_, choose_, fault_percent_);
      fresh.next_connection_ = next_connection_ + 100;
      fresh.init();
      account_.push_back(TxnOutcome::kFenced);
      ++fencings_;
      if (choose_(2) == 0) {
        // The zombie still tries to commit, and is told it is fenced.
        Exchange end = make(TxnApi::kEndTxn, tv2_ ? 5 : 3);
        end.commit = true;
        call(end, true, false);
      }
      producer_id_ = fresh.producer_id_;
      producer_epoch_ = fresh.producer_epoch_;
      next_connection_ = fresh.next_connection_ + 1;
      coordinator_connection_ = leader_connection_ = 0;
      return;
    }
    Exchange end = make(TxnApi::kEndTxn, tv2_ ? 5 : 3);
    end.commit = choose_(100) < 80;
    Answer a = call(end, true, false);
    if (tv2_ && a.client_code == 0 && a.producer_epoch >= 0) producer_epoch_ = a.producer_epoch;
    account_.push_back(end.commit ? TxnOutcome::kCommitted : TxnOutcome::kAborted);
  }

 private:
  Exchange make(TxnApi api, int16_t version) const {
    Exchange x;
    x.api = api;
    x.version = version;
    x.transactional_id = id_;
    x.producer_id = api == TxnApi::kInitProducerId ? -1 : producer_id_;
    x.producer_epoch = api == TxnApi::kInitProducerId ? -1 : producer_epoch_;
    return x;
  }
  uint64_t& connection(bool coordinator) {
    uint64_t& c = coordinator ? coordinator_connection_ : leader_connection_;
    if (c == 0) c = ++next_connection_;
    return c;
  }
  void reconnect(bool coordinator) {
    uint64_t& c = connection(coordinator);
    sink_.closed(c);
    c = 0;
  }
  Fault pick(bool refusable) {
    if (choose_(100) >= fault_percent_) return Fault::kNone;
    auto f = static_cast<Fault>(1 + choose_(static_cast<uint32_t>(Fault::kCount) - 1));
    return f == Fault::kAnsweredRefusal && !refusable ? Fault::kNone : f;
  }
  int16_t retriable_for(TxnApi api) const {
    return api == TxnApi::kProduce ? code(codec::ErrorCode::kNotLeaderOrFollower) : code(codec::ErrorCode::kCoordinatorNotAvailable);
  }
  /// Sends `x` until the client gets an answer it acts on (a lost answer or a retriable error is
  /// sent again, on a new connection when the old one closed). The last tries go through
  /// without faults, so that every transaction ends.
  Answer call(Exchange x, bool coordinator, bool refusable) {
    for (int attempt = 0;; ++attempt) {
      Fault f = attempt < 12 ? pick(refusable) : Fault::kNone;
      if (f == Fault::kSentTwice && x.api != TxnApi::kEndTxn) f = Fault::kNone;
      x.connection = connection(coordinator);
      x.correlation_id = ++correlation_;
      sink_.request(x, f);
      if (f == Fault::kCloseBefore) {
        reconnect(coordinator);
        continue;
      }
      if (f == Fault::kAnsweredRetriable || f == Fault::kAnsweredRefusal) {
        int16_t c = f == Fault::kAnsweredRefusal ? code(codec::ErrorCode::kTopicAuthorizationFailed) : retriable_for(x.api);
        Answer a{-1, c, -1, -1};
        sink_.response(x, f, a);
        if (f == Fault::kAnsweredRefusal) return a;
        continue;
      }
      if (f == Fault::kSentTwice) {
        Exchange again = x;
        again.correlation_id = ++correlation_;
        sink_.request(again, Fault::kNone);
        Answer first = coordinator_.answer(x);
        sink_.response(x, Fault::kNone, first);
        Answer second = coordinator_.answer(again);  // a repeated end of a completed transaction
        sink_.response(again, Fault::kNone, second);
        return first;
      }
      Answer a = coordinator_.answer(x);
      if (f == Fault::kRewrittenRetriable) a.client_code = retriable_for(x.api);
      sink_.response(x, f, a);
      if (f == Fault::kLost) {
        reconnect(coordinator);
        continue;
      }
      if (f == Fault::kHeldThenClosed) {
        sink_.withheld(x.connection, x.correlation_id);
        reconnect(coordinator);
        continue;
      }
      if (f == Fault::kRewrittenRetriable) continue;
      return a;
    }
  }

  bool tv2_;
  std::string id_;
  Coordinator& coordinator_;
  TxnSink& sink_;
  Choose choose_;
  uint32_t fault_percent_;
  int64_t producer_id_ = -1;
  int16_t producer_epoch_ = -1;
  uint64_t coordinator_connection_ = 0, leader_connection_ = 0, next_connection_ = 0;
  int32_t correlation_ = 0;
  std::vector<TxnOutcome> account_;
  int fencings_ = 0;
};

/// Hands the exchanges to a TransactionTracker as the frame observer would read them.
class TrackerSink final : public TxnSink {
 public:
  explicit TrackerSink(observe::TransactionTracker& tracker) : tracker_(tracker) {}
  void request(const Exchange& x, Fault fault) override {
    if (fault == Fault::kCloseBefore) return;  // never handed in (FrameMetrics::on_request)
    observe::TxnRequest r;
    r.api = x.api;
    r.api_version = x.version;
    r.transactional_id = x.transactional_id;
    r.producer_id = x.producer_id;
    r.producer_epoch = x.producer_epoch;
    r.commit = x.commit;
    r.transaction_timeout_ms = x.api == TxnApi::kInitProducerId ? 60000 : -1;
    if (x.api == TxnApi::kAddPartitionsToTxn || x.api == TxnApi::kProduce) r.partitions.push_back({topic_, 0});
    r.records = static_cast<uint64_t>(x.records);
    r.listener = "kafka";
    r.reached_broker = fault != Fault::kAnsweredRetriable && fault != Fault::kAnsweredRefusal;
    tracker_.on_request(x.connection, x.correlation_id, r, now_);
    now_ += std::chrono::milliseconds(1);
  }
  void response(const Exchange& x, Fault fault, const Answer& a) override {
    observe::TxnResponse r;
    r.api = x.api;
    r.error_code = a.client_code;
    r.from_broker = a.broker_code >= 0;
    if (r.from_broker && a.broker_code != a.client_code) r.broker_error_code = a.broker_code;
    r.delivered = fault != Fault::kLost;
    r.producer_id = a.producer_id;
    r.producer_epoch = a.producer_epoch;
    if (fault == Fault::kRewrittenRetriable || fault == Fault::kAnsweredRetriable || fault == Fault::kAnsweredRefusal)
      r.injected_by = "rule";
    tracker_.on_response(x.connection, x.correlation_id, r, now_);
    now_ += std::chrono::milliseconds(1);
  }
  void withheld(uint64_t connection, int32_t correlation_id) override { tracker_.on_response_withheld(connection, correlation_id); }
  void closed(uint64_t connection) override { tracker_.on_connection_closed(connection); }

 private:
  observe::TransactionTracker& tracker_;
  std::string topic_ = "out";
  observe::TxnClock::time_point now_ = observe::TxnClock::time_point{} + std::chrono::hours(1);
};

/// The outcomes the tracker recorded for `id`, in order (open ones included, as kOpen).
inline std::vector<TxnOutcome> tracked_outcomes(const observe::TransactionTracker& tracker, const std::string& id) {
  std::vector<TxnOutcome> out;
  for (const auto& t : tracker.history(id)) out.push_back(t.outcome);
  return out;
}

}  // namespace kproxy::testing::txn_model
