// TransactionTracker: transactions rebuilt from transaction-API events, on both transaction
// protocols, with causes, retries, fencing, timeouts and the memory bounds.
#include "proxy/observe/transaction_tracker.h"

#include <doctest/doctest.h>

#include "codec/generated/error_code.h"
#include "codec/message_support.h"

using namespace kproxy::observe;
using kproxy::codec::ErrorCode;
using namespace std::chrono_literals;

namespace {

constexpr int16_t code(ErrorCode e) { return static_cast<int16_t>(e); }

/// A producer's requests and the broker's answers, on a coordinator connection (1) and a
/// partition-leader connection (2), with a clock the test moves.
struct Client {
  TransactionTracker& tracker;
  std::string id;
  TxnClock::time_point now = TxnClock::time_point{} + 1h;
  int32_t correlation = 0;
  uint64_t coordinator = 1;  ///< the connection of the coordinator requests

  TxnRequest request(TxnApi api, int64_t pid = -1, int16_t epoch = -1) {
    TxnRequest r;
    r.api = api;
    r.transactional_id = id;
    r.producer_id = pid;
    r.producer_epoch = epoch;
    r.listener = "kafka";
    r.client_id = "app-1";
    return r;
  }
  /// Sends `r` on `connection` and answers it with `response`.
  void exchange(uint64_t connection, TxnRequest r, TxnResponse response = {}) {
    int32_t c = ++correlation;
    response.api = r.api;
    tracker.on_request(connection, c, std::move(r), now);
    now += 1ms;
    tracker.on_response(connection, c, response, now);
  }
  void init(int64_t pid, int16_t epoch, int32_t timeout_ms = 60000, int64_t own_pid = -1, int16_t own_epoch = -1) {
    TxnRequest r = request(TxnApi::kInitProducerId, own_pid, own_epoch);
    r.transaction_timeout_ms = timeout_ms;
    TxnResponse resp;
    resp.producer_id = pid;
    resp.producer_epoch = epoch;
    exchange(coordinator, std::move(r), resp);
  }
  void add_partitions(int64_t pid, int16_t epoch, std::vector<TopicPartition> parts, TxnResponse resp = {}) {
    TxnRequest r = request(TxnApi::kAddPartitionsToTxn, pid, epoch);
    for (const auto& p : parts) r.partitions.push_back({p.topic, p.partition});  // views into `parts`
    r.api_version = 3;
    exchange(coordinator, std::move(r), resp);
  }
  void produce(int64_t pid, int16_t epoch, std::vector<TopicPartition> parts, uint64_t records, TxnResponse resp = {}) {
    TxnRequest r = request(TxnApi::kProduce, pid, epoch);
    for (const auto& p : parts) r.partitions.push_back({p.topic, p.partition});
    r.records = records;
    r.bytes = records * 100;
    exchange(2, std::move(r), resp);
  }
  TxnRequest end_request(int64_t pid, int16_t epoch, bool commit, int16_t version = 3) {
    TxnRequest r = request(TxnApi::kEndTxn, pid, epoch);
    r.commit = commit;
    r.api_version = version;
    return r;
  }
  void end_txn(int64_t pid, int16_t epoch, bool commit, TxnResponse resp = {}, int16_t version = 3) {
    exchange(coordinator, end_request(pid, epoch, commit, version), resp);
  }
  /// Sends `r` on `connection` `after` from now and leaves it in flight (held on its way, or
  /// answered later): answer() gives its answer.
  int32_t send(uint64_t connection, const TxnRequest& r, TxnClock::duration after = {}) {
    int32_t c = ++correlation;
    tracker.on_request(connection, c, r, now + after);
    return c;
  }
  void answer(uint64_t connection, int32_t c, TxnResponse response, TxnClock::duration after = {}, TxnApi api = TxnApi::kEndTxn) {
    response.api = api;
    tracker.on_response(connection, c, response, now + after);
  }
};

TxnResponse error(ErrorCode e, std::string rule = "") {
  TxnResponse r;
  r.error_code = code(e);
  r.injected_by = std::move(rule);
  return r;
}

}  // namespace

TEST_CASE("transaction tracker: a transaction.version 1 commit, its partitions, offsets and records") {
  TransactionTracker t;
  Client c{t, "orders"};
  c.init(7, 0);
  c.add_partitions(7, 0, {{"out", 0}, {"out", 1}});
  c.produce(7, 0, {{"out", 0}, {"out", 1}}, 10);
  TxnRequest offsets = c.request(TxnApi::kAddOffsetsToTxn, 7, 0);
  offsets.group_id = "g";
  c.exchange(1, offsets);
  TxnRequest commit_offsets = c.request(TxnApi::kTxnOffsetCommit, 7, 0);
  commit_offsets.group_id = "g";
  commit_offsets.partitions = {{"in", 0}};
  c.exchange(3, commit_offsets);
  CHECK(t.stats(c.now).open == 1);
  REQUIRE(t.open_transactions().size() == 1);
  c.end_txn(7, 0, true);

  auto h = t.history("orders");
  REQUIRE(h.size() == 1);
  const TransactionRecord& r = h[0];
  CHECK(r.outcome == TxnOutcome::kCommitted);
  CHECK(r.transaction_version == 1);
  CHECK(r.producer_id == 7);
  CHECK(r.partitions == std::set<TopicPartition>{{"out", 0}, {"out", 1}});  // not the input partition of TxnOffsetCommit
  CHECK(r.groups == std::set<std::string>{"g"});
  CHECK(r.records == 10);
  CHECK(r.bytes == 1000);
  CHECK(r.listener == "kafka");
  CHECK(r.client_id == "app-1");
  CHECK(r.duration(c.now) > 0ns);
  CHECK(!r.cause);
  auto s = t.stats(c.now);
  CHECK(s.ended[TxnOutcome::kCommitted] == 1);
  CHECK(s.open == 0);
  CHECK(s.abort_causes.empty());
}

TEST_CASE("transaction tracker: transaction.version 2 infers partitions from Produce and follows the epoch EndTxn gives") {
  TransactionTracker t;
  Client c{t, "tv2"};
  c.init(9, 0);
  c.produce(9, 0, {{"out", 2}}, 5);
  TxnResponse bumped;
  bumped.producer_id = 9;
  bumped.producer_epoch = 1;
  c.end_txn(9, 0, true, bumped, 5);
  c.produce(9, 1, {{"out", 0}}, 3);  // the next transaction, with the epoch EndTxn returned
  c.end_txn(9, 1, false, {}, 5);

  auto h = t.history("tv2");
  REQUIRE(h.size() == 2);
  CHECK(h[0].outcome == TxnOutcome::kCommitted);
  CHECK(h[0].transaction_version == 2);
  CHECK(h[0].partitions == std::set<TopicPartition>{{"out", 2}});
  CHECK(h[1].outcome == TxnOutcome::kAborted);
  CHECK(h[1].producer_epoch == 1);
  CHECK(h[1].partitions == std::set<TopicPartition>{{"out", 0}});
  auto s = t.stats(c.now);
  CHECK(s.epoch_bumps == 0);  // a new epoch per transaction is how transaction.version 2 works, not a bump
  CHECK(s.abort_causes[{"client", false}] == 1);
}

TEST_CASE("transaction tracker: the cause of an abort is the first error that is not a retry, with the rule that injected it") {
  TransactionTracker t;
  Client c{t, "abortable"};
  c.init(3, 0);
  c.add_partitions(3, 0, {{"out", 0}});
  c.produce(3, 0, {{"out", 0}}, 1, error(ErrorCode::kNotCoordinator));  // a retry: counted, not the cause
  c.produce(3, 0, {{"out", 0}}, 1, error(ErrorCode::kTransactionAbortable, "abortable-produce"));
  c.produce(3, 0, {{"out", 0}}, 1, error(ErrorCode::kUnknownServerError));
  c.end_txn(3, 0, false);

  auto h = t.history("abortable");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kAborted);
  CHECK(h[0].retries == 1);
  CHECK(h[0].errors.size() == 3);
  REQUIRE(h[0].cause);
  CHECK(h[0].cause->error_code == code(ErrorCode::kTransactionAbortable));
  CHECK(h[0].cause->api == TxnApi::kProduce);
  CHECK(h[0].cause->injected_by == "abortable-produce");
  auto s = t.stats(c.now);
  CHECK(s.ended[TxnOutcome::kAborted] == 1);
  CHECK(s.abort_causes[{"TRANSACTION_ABORTABLE", true}] == 1);
}

TEST_CASE("transaction tracker: a retried Produce error is no cause once the Produce went through; the client's abort is its own") {
  TransactionTracker t;
  Client c{t, "retried"};
  c.init(5, 0);
  c.add_partitions(5, 0, {{"out", 0}});
  c.produce(5, 0, {{"out", 0}}, 1, error(ErrorCode::kNotEnoughReplicas, "isr"));
  c.produce(5, 0, {{"out", 0}}, 1);  // the retry went through
  c.end_txn(5, 0, false);
  // Next transaction: the client gave up retrying (delivery timeout) and aborted.
  c.add_partitions(5, 0, {{"out", 1}});
  c.produce(5, 0, {{"out", 1}}, 1, error(ErrorCode::kNotLeaderOrFollower));
  c.produce(5, 0, {{"out", 1}}, 1, error(ErrorCode::kNotEnoughReplicas, "isr"));
  c.end_txn(5, 0, false);

  auto h = t.history("retried");
  REQUIRE(h.size() == 2);
  CHECK(h[0].outcome == TxnOutcome::kAborted);
  CHECK(h[0].retries == 1);
  CHECK(!h[0].cause);
  CHECK(h[1].outcome == TxnOutcome::kAborted);
  CHECK(h[1].retries == 2);
  REQUIRE(h[1].cause);
  CHECK(h[1].cause->error_code == code(ErrorCode::kNotEnoughReplicas));
  CHECK(h[1].cause->injected_by == "isr");
  auto s = t.stats(c.now);
  CHECK(s.abort_causes[{"client", false}] == 1);
  CHECK(s.abort_causes[{"NOT_ENOUGH_REPLICAS", true}] == 1);
}

TEST_CASE("transaction tracker: transaction.version 1, an AddPartitionsToTxn refused before anything was added ends the transaction") {
  TransactionTracker t;
  Client c{t, "refused"};
  c.init(6, 0);
  // Refused at once: the client aborts without EndTxn (nothing at the coordinator to end).
  c.add_partitions(6, 0, {{"out", 0}}, error(ErrorCode::kConcurrentTransactions, "busy"));  // a retry first
  CHECK(t.stats(c.now).open == 1);
  c.add_partitions(6, 0, {{"out", 0}}, error(ErrorCode::kTopicAuthorizationFailed, "acl"));
  CHECK(t.stats(c.now).open == 0);
  // The next transaction is a new one, with its own partitions.
  c.add_partitions(6, 0, {{"out", 1}});
  c.produce(6, 0, {{"out", 1}}, 3);
  c.end_txn(6, 0, true);
  // Refused after a partition was added: the coordinator has it, the client ends it with EndTxn.
  c.add_partitions(6, 0, {{"out", 2}});
  c.add_partitions(6, 0, {{"out", 0}}, error(ErrorCode::kTopicAuthorizationFailed, "acl"));
  CHECK(t.stats(c.now).open == 1);
  c.end_txn(6, 0, false);

  auto h = t.history("refused");
  REQUIRE(h.size() == 3);
  CHECK(h[0].outcome == TxnOutcome::kAborted);
  CHECK(h[0].partitions == std::set<TopicPartition>{{"out", 0}});
  CHECK(h[0].retries == 1);
  REQUIRE(h[0].cause);
  CHECK(h[0].cause->error_code == code(ErrorCode::kTopicAuthorizationFailed));
  CHECK(h[0].cause->injected_by == "acl");
  CHECK(h[1].outcome == TxnOutcome::kCommitted);
  CHECK(h[1].partitions == std::set<TopicPartition>{{"out", 1}});
  CHECK(h[1].records == 3);
  CHECK(h[2].outcome == TxnOutcome::kAborted);
  CHECK(h[2].partitions == std::set<TopicPartition>{{"out", 0}, {"out", 2}});
  REQUIRE(h[2].cause);
  CHECK(h[2].cause->api == TxnApi::kAddPartitionsToTxn);
  auto s = t.stats(c.now);
  CHECK(s.ended[TxnOutcome::kAborted] == 2);
  CHECK(s.ended[TxnOutcome::kCommitted] == 1);
  CHECK(s.abort_causes[{"TOPIC_AUTHORIZATION_FAILED", true}] == 2);
  // A late EndTxn(abort) for the first one (librdkafka sends it; the coordinator refuses it) ends nothing.
  c.add_partitions(6, 0, {{"out", 0}}, error(ErrorCode::kTopicAuthorizationFailed, "acl"));
  c.end_txn(6, 0, false, error(ErrorCode::kInvalidTxnState));
  CHECK(t.stats(c.now).ended[TxnOutcome::kAborted] == 3);
  CHECK(t.stats(c.now).open == 0);
}

TEST_CASE("transaction tracker: after a refusal, AddPartitionsToTxn then EndTxn(abort) is the refused transaction's own abort") {
  TransactionTracker t;
  Client c{t, "tail"};
  c.init(8, 0);
  // Partitions 0 and 2 refused before the coordinator had any; partition 1 was still waiting:
  // the Java client adds it while it aborts (a retry first), then ends the refused one.
  c.add_partitions(8, 0, {{"out", 0}, {"out", 2}}, error(ErrorCode::kTopicAuthorizationFailed, "acl"));
  CHECK(t.stats(c.now).ended[TxnOutcome::kAborted] == 1);
  c.add_partitions(8, 0, {{"out", 1}}, error(ErrorCode::kCoordinatorLoadInProgress, "loading"));
  c.add_partitions(8, 0, {{"out", 1}});
  CHECK(t.stats(c.now).open == 0);
  c.end_txn(8, 0, false);
  // The refused one's next transaction, begun with an AddPartitionsToTxn after the refusal: a
  // record shows it is a new one.
  c.add_partitions(8, 0, {{"out", 0}}, error(ErrorCode::kTopicAuthorizationFailed, "acl"));
  c.add_partitions(8, 0, {{"out", 2}}, error(ErrorCode::kConcurrentTransactions, "busy"));
  c.add_partitions(8, 0, {{"out", 2}});
  CHECK(t.stats(c.now).open == 0);
  c.produce(8, 0, {{"out", 2}}, 5);
  CHECK(t.stats(c.now).open == 1);
  c.end_txn(8, 0, true);

  auto h = t.history("tail");
  REQUIRE(h.size() == 3);
  CHECK(h[0].outcome == TxnOutcome::kAborted);
  CHECK(h[0].partitions == std::set<TopicPartition>{{"out", 0}, {"out", 1}, {"out", 2}});
  REQUIRE(h[0].cause);
  CHECK(h[0].cause->error_code == code(ErrorCode::kTopicAuthorizationFailed));
  CHECK(h[0].retries == 1);
  CHECK(h[0].errors.size() == 2);
  CHECK(h[1].outcome == TxnOutcome::kAborted);
  CHECK(h[1].partitions == std::set<TopicPartition>{{"out", 0}});
  CHECK(h[2].outcome == TxnOutcome::kCommitted);
  CHECK(h[2].partitions == std::set<TopicPartition>{{"out", 2}});
  CHECK(h[2].records == 5);
  CHECK(h[2].retries == 1);
  CHECK(h[2].transaction_version == 1);
  CHECK_FALSE(h[2].cause);
  CHECK(h[2].begin < h[2].last_activity);
  auto s = t.stats(c.now);
  CHECK(s.ended[TxnOutcome::kAborted] == 2);
  CHECK(s.ended[TxnOutcome::kCommitted] == 1);
  CHECK(s.abort_causes[{"TOPIC_AUTHORIZATION_FAILED", true}] == 2);
  CHECK(s.abort_causes.count({"client", false}) == 0);
}

TEST_CASE("transaction tracker: CONCURRENT_TRANSACTIONS on EndTxn is a retry; the commit that follows counts once") {
  TransactionTracker t;
  Client c{t, "busy"};
  c.init(4, 0);
  c.add_partitions(4, 0, {{"out", 0}});
  c.end_txn(4, 0, true, error(ErrorCode::kConcurrentTransactions, "busy-endtxn"));
  CHECK(t.stats(c.now).open == 1);
  c.end_txn(4, 0, true);
  auto h = t.history("busy");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kCommitted);
  CHECK(h[0].retries == 1);
  CHECK(!h[0].cause);
  CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == 1);
}

TEST_CASE("transaction tracker: a second producer with the same id fences the first; the zombie's requests are not counted") {
  TransactionTracker t;
  Client first{t, "shared"};
  first.init(5, 0);
  first.add_partitions(5, 0, {{"out", 0}});
  Client second{t, "shared", first.now, 100};
  second.init(5, 1);  // a fresh instance: no producer id in its request
  auto s = t.stats(second.now);
  CHECK(s.fencing_events == 1);
  CHECK(s.ended[TxnOutcome::kFenced] == 1);
  CHECK(s.open == 0);
  CHECK(s.abort_causes == std::map<std::pair<std::string, bool>, uint64_t>{{{"new_producer", false}, 1}});  // not "client"
  auto h = t.history("shared");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kFenced);
  CHECK(h[0].producer_epoch == 0);

  // The fenced record names the epoch that fenced it.
  CHECK(h[0].fenced_by_producer_id == 5);
  CHECK(h[0].fenced_by_epoch == 1);
  CHECK(h[0].errors.empty());

  // The old producer's EndTxn is refused: nothing open to end, nothing counted twice.
  first.now = second.now;
  first.end_txn(5, 0, true, error(ErrorCode::kProducerFenced));
  s = t.stats(first.now);
  CHECK(s.ended[TxnOutcome::kFenced] == 1);
  CHECK(s.fencing_events == 1);  // one fencing, however many of the zombie's requests are refused
  // The zombie's Produce (its old epoch) begins nothing; its error is kept in its fenced transaction.
  first.produce(5, 0, {{"out", 2}}, 4, error(ErrorCode::kInvalidProducerEpoch));
  s = t.stats(first.now);
  CHECK(s.open == 0);
  CHECK(s.fencing_events == 1);
  CHECK(s.ended[TxnOutcome::kFenced] == 1);
  h = t.history("shared");
  REQUIRE(h.size() == 1);
  REQUIRE(h[0].errors.size() == 2);
  CHECK(h[0].errors[0].api == TxnApi::kEndTxn);
  CHECK(h[0].errors[0].error_code == code(ErrorCode::kProducerFenced));
  CHECK(h[0].errors[1].api == TxnApi::kProduce);
  CHECK(h[0].records == 0);  // the refused records were never part of it
  CHECK(h[0].partitions == std::set<TopicPartition>{{"out", 0}});
  // The new producer's transaction is its own.
  second.now = first.now;
  second.add_partitions(5, 1, {{"out", 1}});
  second.end_txn(5, 1, true);
  h = t.history("shared");
  REQUIRE(h.size() == 2);
  CHECK(h[1].outcome == TxnOutcome::kCommitted);
  CHECK(h[1].producer_epoch == 1);
  CHECK(h[1].fenced_by_epoch == -1);
  CHECK(h[1].errors.empty());
}

TEST_CASE("transaction tracker: a zombie's request answered after the new instance took the id leaves the new transaction alone") {
  TransactionTracker t;
  Client first{t, "racing"};
  first.init(15, 0);
  first.add_partitions(15, 0, {{"out", 0}});
  // The old producer's Produce is in flight (sent with the then current epoch) when the new
  // instance's InitProducerId is answered, and the new instance begins a transaction.
  TxnRequest late = first.request(TxnApi::kProduce, 15, 0);
  late.partitions = {{"out", 0}};
  late.records = 3;
  t.on_request(2, 900, late, first.now);
  Client second{t, "racing", first.now, 100};
  second.init(15, 1);
  second.add_partitions(15, 1, {{"out", 1}});
  t.on_response(2, 900, error(ErrorCode::kProducerFenced), second.now);
  auto s = t.stats(second.now);
  CHECK(s.open == 1);
  CHECK(s.fencing_events == 1);
  CHECK(s.ended[TxnOutcome::kFenced] == 1);
  auto h = t.history("racing");
  REQUIRE(h.size() == 2);
  CHECK(h[0].outcome == TxnOutcome::kFenced);
  REQUIRE(h[0].errors.size() == 1);
  CHECK(h[0].errors[0].error_code == code(ErrorCode::kProducerFenced));
  CHECK(h[1].outcome == TxnOutcome::kOpen);
  CHECK(h[1].producer_epoch == 1);
  CHECK(h[1].errors.empty());
}

TEST_CASE("transaction tracker: a producer that bumps its own epoch (KIP-360) aborts what it had open") {
  TransactionTracker t;
  Client c{t, "bump"};
  c.init(6, 0);
  c.add_partitions(6, 0, {{"out", 0}});
  c.produce(6, 0, {{"out", 0}}, 1, error(ErrorCode::kInvalidProducerEpoch));  // the coordinator still has it open
  CHECK(t.stats(c.now).ended[TxnOutcome::kFenced] == 0);
  c.add_partitions(6, 0, {{"out", 0}});
  c.init(6, 1, 60000, 6, 0);  // its own id and epoch in the request
  auto s = t.stats(c.now);
  CHECK(s.epoch_bumps == 1);
  CHECK(s.ended[TxnOutcome::kAborted] == 1);
}

TEST_CASE("transaction tracker: an open transaction shows its age, and ends timed_out after transaction.timeout.ms") {
  TransactionTracker t;
  Client c{t, "hanging"};
  c.init(8, 0, /*timeout_ms=*/1000);
  c.add_partitions(8, 0, {{"out", 0}});
  auto begun = c.now;
  t.sweep(begun + 500ms);
  auto s = t.stats(begun + 500ms);
  CHECK(s.open == 1);
  CHECK(s.oldest_open_age >= 500ms);
  CHECK(s.oldest_open_age < 510ms);
  t.sweep(begun + 1500ms);
  s = t.stats(begun + 1500ms);
  CHECK(s.open == 0);
  CHECK(s.ended[TxnOutcome::kTimedOut] == 1);
}

TEST_CASE("transaction tracker: a timed_out transaction lasted its timeout, however late the sweep") {
  TransactionTracker t;
  Client c{t, "late-sweep"};
  c.init(16, 0, /*timeout_ms=*/5000);
  auto begun = c.now;
  c.add_partitions(16, 0, {{"out", 0}});
  t.sweep(begun + 42s);
  auto h = t.history("late-sweep");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kTimedOut);
  CHECK(h[0].duration(begun + 42s) == 5s);
  auto s = t.stats(begun + 42s);
  CHECK(s.durations[TxnOutcome::kTimedOut].count() == 1);
  CHECK(s.durations[TxnOutcome::kTimedOut].buckets[9] == 1);  // le 5 s
  CHECK(s.durations[TxnOutcome::kTimedOut].sum == 5s);
}

TEST_CASE("transaction tracker: the duration histogram counts each ended transaction in its outcome's bucket") {
  TransactionTracker::Limits limits;
  limits.silent_after = 10s;
  TransactionTracker t(limits);
  Client c{t, "timed"};
  c.init(17, 0, /*timeout_ms=*/1000);
  // A transaction from its first AddPartitionsToTxn to the response of its EndTxn (each exchange
  // takes 1 ms of the test's clock).
  auto run = [&](std::chrono::milliseconds lasting, bool commit) {
    auto begun = c.now;
    c.add_partitions(17, 0, {{"out", 0}});
    c.now = begun + lasting - 1ms;
    c.end_txn(17, 0, commit);
    REQUIRE(c.now == begun + lasting);
  };
  run(5ms, true);     // on a bound: counts in that bucket (le 0.005)
  run(6ms, true);     // le 0.01
  run(120s, true);    // le 120
  run(121s, true);    // +Inf
  run(3s, false);     // aborted, le 5
  run(250ms, false);  // aborted, le 0.25
  c.add_partitions(17, 0, {{"out", 0}});
  t.sweep(c.now + 1500ms);  // timed out: lasted its 1000 ms (le 1)
  Client vanished{t, "vanished", c.now + 1500ms};
  vanished.add_partitions(18, 0, {{"out", 0}});  // no InitProducerId seen: no timeout known
  t.sweep(vanished.now + 20s);                   // ends unknown, 20001 ms after it began (le 30)

  auto s = t.stats(vanished.now + 20s);
  using Buckets = std::array<uint64_t, kTxnDurationBoundsMs.size() + 1>;
  //                            5ms 10 25 50 100 250 500 1s 2.5 5s 10 30 60 120 +Inf
  CHECK(s.durations[TxnOutcome::kCommitted].buckets == Buckets{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1});
  CHECK(s.durations[TxnOutcome::kCommitted].count() == 4);
  CHECK(s.durations[TxnOutcome::kCommitted].sum == 5ms + 6ms + 120s + 121s);
  CHECK(s.durations[TxnOutcome::kAborted].buckets == Buckets{0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0});
  CHECK(s.durations[TxnOutcome::kAborted].sum == 3250ms);
  CHECK(s.durations[TxnOutcome::kTimedOut].buckets == Buckets{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0});
  CHECK(s.durations[TxnOutcome::kTimedOut].sum == 1000ms);
  CHECK(s.durations[TxnOutcome::kUnknown].buckets == Buckets{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0});
  CHECK(s.durations[TxnOutcome::kUnknown].sum == 20001ms);
  CHECK(s.durations.count(TxnOutcome::kFenced) == 0);
  CHECK(s.ended[TxnOutcome::kCommitted] == 4);

  // A fenced one lasts until the new instance's InitProducerId is answered.
  Client zombie{t, "fenced", vanished.now + 20s};
  zombie.init(19, 0);
  auto begun = zombie.now;
  zombie.add_partitions(19, 0, {{"out", 0}});
  Client successor{t, "fenced", begun + 70ms, 100};
  successor.init(19, 1);  // answered 71 ms after the zombie's transaction began
  s = t.stats(successor.now);
  CHECK(s.durations[TxnOutcome::kFenced].buckets == Buckets{0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(s.durations[TxnOutcome::kFenced].sum == 71ms);
}

TEST_CASE("transaction tracker: without a known timeout a silent transaction ends unknown") {
  TransactionTracker::Limits limits;
  limits.silent_after = 10s;
  TransactionTracker t(limits);
  Client c{t, "vanished"};
  c.add_partitions(11, 0, {{"out", 0}});  // kproxy never saw its InitProducerId
  t.sweep(c.now + 5s);
  CHECK(t.stats(c.now + 5s).open == 1);
  t.sweep(c.now + 11s);
  CHECK(t.stats(c.now + 11s).ended[TxnOutcome::kUnknown] == 1);
}

TEST_CASE("transaction tracker: bounded ids and history; what does not fit is counted") {
  TransactionTracker::Limits limits;
  limits.max_ids = 2;
  limits.history_per_id = 2;
  TransactionTracker t(limits);
  Client a{t, "a"}, b{t, "b"}, c{t, "c"};
  a.init(1, 0);
  a.add_partitions(1, 0, {{"x", 0}});
  b.init(2, 0);
  b.add_partitions(2, 0, {{"x", 0}});
  c.init(3, 0);  // both tracked ids have an open transaction: no room
  CHECK(t.stats(c.now).untracked == 1);
  CHECK(t.history("c").empty());

  for (int i = 0; i < 3; ++i) {
    a.end_txn(1, 0, true);
    a.add_partitions(1, 0, {{"x", 0}});
  }
  auto h = t.history("a");
  REQUIRE(h.size() == 3);  // two ended (the bound) and the open one
  CHECK(h[0].outcome == TxnOutcome::kCommitted);
  CHECK(h[2].outcome == TxnOutcome::kOpen);
  CHECK(t.stats(a.now).ended[TxnOutcome::kCommitted] == 3);  // counted even when the history forgot them

  b.end_txn(2, 0, true);  // b has nothing open now: the idlest such id gives way to a new one
  c.init(3, 0);
  c.add_partitions(3, 0, {{"x", 0}});
  CHECK(t.history("c").size() == 1);
  CHECK(t.history("b").empty());
}

TEST_CASE("transaction tracker: non-transactional requests, unmatched responses and closed connections change nothing") {
  TransactionTracker t;
  TxnRequest plain;
  plain.api = TxnApi::kProduce;
  plain.partitions = {{"out", 0}};
  auto now = TxnClock::now();
  t.on_request(1, 1, plain, now);  // no transactional.id
  t.on_response(1, 1, error(ErrorCode::kProducerFenced), now);
  t.on_response(1, 99, error(ErrorCode::kProducerFenced), now);  // nothing sent with that id
  CHECK(t.stats(now).open == 0);
  CHECK(t.stats(now).fencing_events == 0);

  Client c{t, "closing"};
  c.init(12, 0);
  TxnRequest commit = c.request(TxnApi::kEndTxn, 12, 0);
  commit.commit = true;
  c.add_partitions(12, 0, {{"out", 0}});
  t.on_request(1, 500, commit, c.now);
  t.on_connection_closed(1);
  t.on_response(1, 500, TxnResponse{}, c.now);  // the connection is gone: the answer is not matched
  CHECK(t.stats(c.now).open == 1);
  CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == 0);
}

TEST_CASE("transaction tracker: clean Produce answers are wanted only while tracing or while a Produce retry is unresolved") {
  TransactionTracker t;
  Client c{t, "quiet"};
  c.init(21, 0);
  CHECK_FALSE(t.wants_clean_produce_answers());
  c.produce(21, 0, {{"out", 0}}, 3);
  CHECK_FALSE(t.wants_clean_produce_answers());
  CHECK_FALSE(t.awaiting_responses());  // a transactional Produce is not queued request by request
  c.produce(21, 0, {{"out", 0}}, 1, error(ErrorCode::kNotEnoughReplicas, "isr"));
  CHECK(t.wants_clean_produce_answers());  // its retry's clean answer resolves it
  c.produce(21, 0, {{"out", 0}}, 1);
  CHECK_FALSE(t.wants_clean_produce_answers());
  c.end_txn(21, 0, true);
  auto h = t.history("quiet");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kCommitted);
  CHECK(h[0].records == 5);
  CHECK(h[0].retries == 1);
  CHECK_FALSE(h[0].cause);

  // A retry still unresolved when the transaction ends: the flag goes with the transaction.
  c.produce(21, 0, {{"out", 1}}, 1, error(ErrorCode::kNotEnoughReplicas, "isr"));
  CHECK(t.wants_clean_produce_answers());
  c.end_txn(21, 0, false);
  CHECK_FALSE(t.wants_clean_produce_answers());
  REQUIRE(t.history("quiet").size() == 2);
  CHECK(t.history("quiet")[1].cause->error_code == code(ErrorCode::kNotEnoughReplicas));  // it gave up on it

  t.set_trace_hook([](const TransactionRecord&, std::vector<TxnRequestSpan>&&, uint32_t) {}, 8);
  CHECK(t.wants_clean_produce_answers());
  t.set_trace_hook(nullptr, 8);
  CHECK_FALSE(t.wants_clean_produce_answers());
}

TEST_CASE("transaction tracker: a Produce answer is read against its connection's last transactional Produce") {
  TransactionTracker t;
  Client a{t, "first"};
  Client b{t, "second"};
  a.init(31, 0);
  b.init(32, 0);
  // "first" produces on connection 2 (Client::produce); "second" on connection 5.
  a.produce(31, 0, {{"out", 0}}, 2);
  TxnRequest r = b.request(TxnApi::kProduce, 32, 0);
  r.partitions = {{"out", 1}};
  r.records = 4;
  t.on_request(5, 70, r, b.now);
  TxnResponse refused = error(ErrorCode::kTopicAuthorizationFailed, "acl");
  refused.api = TxnApi::kProduce;
  t.on_response(5, 70, refused, b.now);
  a.end_txn(31, 0, true);
  b.end_txn(32, 0, false);
  REQUIRE(t.history("first").size() == 1);
  CHECK_FALSE(t.history("first")[0].cause);
  REQUIRE(t.history("second").size() == 1);
  REQUIRE(t.history("second")[0].cause);
  CHECK(t.history("second")[0].cause->injected_by == "acl");
  CHECK(t.history("second")[0].records == 4);

  // An answer on a connection that sent no transactional Produce is nobody's.
  t.on_response(9, 1, refused, b.now);
  CHECK(t.stats(b.now).fencing_events == 0);
}

TEST_CASE("transaction tracker: a producer writing to the same partitions again adds records, not partitions") {
  TransactionTracker t;
  Client c{t, "steady"};
  c.init(41, 0);
  for (int i = 0; i < 5; ++i) c.produce(41, 0, {{"out", 0}, {"out", 1}}, 10);
  c.produce(41, 0, {{"out", 1}, {"out", 2}}, 10);  // one new partition among known ones
  c.produce(41, 0, {{"out", 0}, {"out", 1}}, 10);
  c.end_txn(41, 0, true);
  c.produce(41, 0, {{"out", 0}}, 1);  // the next transaction starts with its own partitions
  auto h = t.history("steady");
  REQUIRE(h.size() == 2);
  CHECK(h[0].records == 70);
  CHECK(h[0].partitions == std::set<TopicPartition>{{"out", 0}, {"out", 1}, {"out", 2}});
  CHECK(h[1].partitions == std::set<TopicPartition>{{"out", 0}});
  CHECK(h[1].records == 1);
}

TEST_CASE("transaction tracker: a partition named by topic id is recorded by the name Metadata taught, else by the id") {
  TransactionTracker t;
  Client c{t, "by-id"};
  c.init(51, 0);
  TxnRequest r = c.request(TxnApi::kProduce, 51, 0);
  r.partitions = {{{}, 3, {0xab}}};
  r.records = 1;
  t.on_request(2, 80, r, c.now);
  c.end_txn(51, 0, true);
  auto h = t.history("by-id");
  REQUIRE(h.size() == 1);
  REQUIRE(h[0].partitions.size() == 1);
  CHECK(h[0].partitions.begin()->partition == 3);
  CHECK(h[0].partitions.begin()->topic ==
        kproxy::codec::json_uuid(kproxy::codec::Uuid{0xab}));  // no Metadata seen: the id as Kafka prints it
}

TEST_CASE("transaction tracker: the ended hook sees every transaction that ends") {
  TransactionTracker t;
  std::vector<std::string> seen;
  t.set_ended_hook([&](const TransactionRecord& r) { seen.push_back(std::string(txn_outcome_name(r.outcome))); });
  Client c{t, "hooked"};
  c.init(13, 0);
  c.add_partitions(13, 0, {{"out", 0}});
  c.end_txn(13, 0, true);
  c.add_partitions(13, 0, {{"out", 0}});
  c.end_txn(13, 0, false);
  CHECK(seen == std::vector<std::string>{"committed", "aborted"});
  CHECK(txn_api_name(TxnApi::kAddOffsetsToTxn) == "AddOffsetsToTxn");
}

TEST_CASE("transaction tracker: the event hook sees each step, and nothing while no one wants events") {
  TransactionTracker t;
  std::vector<std::string> steps;
  bool wanted = false;
  t.set_event_hook(
      [&](const TxnEvent& e) {
        std::string s(txn_event_name(e.kind));
        if (e.kind == TxnEvent::Kind::kPartitions) s += ":" + std::to_string(e.added.size());
        if (e.kind == TxnEvent::Kind::kError) s += ":" + std::to_string(e.error->error_code);
        if (e.kind == TxnEvent::Kind::kOffsets) s += ":" + e.group;
        if (e.kind == TxnEvent::Kind::kEnd) s += ":" + std::string(txn_outcome_name(e.transaction.outcome));
        steps.push_back(s + "@" + std::to_string(e.connection));
      },
      [&] { return wanted; });
  Client c{t, "watched"};
  c.init(14, 0);
  c.add_partitions(14, 0, {{"out", 0}});
  CHECK(steps.empty());  // no one listening: no events built
  wanted = true;
  c.add_partitions(14, 0, {{"out", 0}, {"out", 1}});  // one of the two is new
  c.produce(14, 0, {{"out", 1}}, 2);                  // nothing new
  TxnRequest offsets = c.request(TxnApi::kAddOffsetsToTxn, 14, 0);
  offsets.group_id = "g";
  c.exchange(1, offsets);
  c.produce(14, 0, {{"out", 1}}, 1, error(ErrorCode::kTransactionAbortable, "rule"));
  c.end_txn(14, 0, false);
  c.add_partitions(14, 0, {{"out", 0}});
  CHECK(steps == std::vector<std::string>{"partitions_added:1@1", "offsets_added:g@1", "error:120@2", "end:aborted@1", "begin@1",
                                          "partitions_added:1@1"});
}

namespace {

/// What the trace hook received for one transaction.
struct Traced {
  std::string outcome;
  std::vector<TxnRequestSpan> requests;
  uint32_t dropped = 0;
};

}  // namespace

TEST_CASE("transaction tracker: the trace hook gets each transaction's answered requests, with errors and the rule that injected them") {
  TransactionTracker t;
  std::vector<Traced> traced;
  t.set_trace_hook(
      [&](const TransactionRecord& r, std::vector<TxnRequestSpan>&& requests, uint32_t dropped) {
        traced.push_back({std::string(txn_outcome_name(r.outcome)), std::move(requests), dropped});
      },
      16);
  Client c{t, "traced"};
  c.init(4, 0);  // before the transaction: not part of it
  auto begun = c.now;
  c.add_partitions(4, 0, {{"out", 0}, {"out", 1}});
  c.produce(4, 0, {{"out", 0}}, 7);
  c.end_txn(4, 0, true, error(ErrorCode::kConcurrentTransactions, "busy-endtxn"));
  c.end_txn(4, 0, true);
  REQUIRE(traced.size() == 1);
  CHECK(traced[0].outcome == "committed");
  CHECK(traced[0].dropped == 0);
  const auto& r = traced[0].requests;
  REQUIRE(r.size() == 4);
  CHECK(r[0].api == TxnApi::kAddPartitionsToTxn);
  CHECK(r[0].partitions == 2);
  CHECK(r[0].sent == begun);  // the transaction's begin is its first request's
  CHECK(r[0].answered == begun + 1ms);
  CHECK(r[0].connection == 1);
  CHECK(r[1].api == TxnApi::kProduce);
  CHECK(r[1].records == 7);
  CHECK(r[1].connection == 2);
  CHECK(r[2].api == TxnApi::kEndTxn);
  CHECK(r[2].api_version == 3);
  CHECK(r[2].error_code == code(ErrorCode::kConcurrentTransactions));
  CHECK(r[2].injected_by == "busy-endtxn");
  CHECK(r[3].api == TxnApi::kEndTxn);
  CHECK(r[3].error_code == 0);
  CHECK(r[3].injected_by.empty());

  // The next transaction starts with no requests of the last one.
  c.add_partitions(4, 0, {{"out", 0}});
  c.end_txn(4, 0, false);
  REQUIRE(traced.size() == 2);
  CHECK(traced[1].outcome == "aborted");
  CHECK(traced[1].requests.size() == 2);
}

TEST_CASE("transaction tracker: the trace of a fenced and of a timed-out transaction") {
  TransactionTracker t;
  std::vector<Traced> traced;
  t.set_trace_hook(
      [&](const TransactionRecord& r, std::vector<TxnRequestSpan>&& requests, uint32_t dropped) {
        traced.push_back({std::string(txn_outcome_name(r.outcome)), std::move(requests), dropped});
      },
      16);
  SUBCASE("fenced by an error: the failing request is the last span") {
    Client c{t, "fenced"};
    c.init(5, 0);
    c.add_partitions(5, 0, {{"out", 0}});
    c.produce(5, 0, {{"out", 0}}, 3, error(ErrorCode::kProducerFenced, "fence"));
    CHECK(traced.empty());      // the coordinator still has it: the client may go on
    t.on_connection_closed(2);  // it gives up: the connection the answer came on closes
    REQUIRE(traced.size() == 1);
    CHECK(traced[0].outcome == "fenced");
    REQUIRE(traced[0].requests.size() == 2);
    CHECK(traced[0].requests[1].api == TxnApi::kProduce);
    CHECK(traced[0].requests[1].injected_by == "fence");
  }
  SUBCASE("fenced by a new instance: its InitProducerId is in the trace") {
    Client c{t, "taken"};
    c.init(6, 0);
    c.add_partitions(6, 0, {{"out", 0}});
    c.init(7, 0);
    REQUIRE(traced.size() == 1);
    CHECK(traced[0].outcome == "fenced");
    REQUIRE(traced[0].requests.size() == 2);
    CHECK(traced[0].requests[1].api == TxnApi::kInitProducerId);
  }
  SUBCASE("timed out: ended by a sweep, with what it had") {
    Client c{t, "hanging"};
    c.init(8, 0, /*timeout_ms=*/1000);
    c.add_partitions(8, 0, {{"out", 0}});
    t.sweep(c.now + 2s);
    REQUIRE(traced.size() == 1);
    CHECK(traced[0].outcome == "timed_out");
    CHECK(traced[0].requests.size() == 1);
  }
}

TEST_CASE("transaction tracker: requests past the per-transaction bound are counted; an error or an EndTxn still gets in") {
  TransactionTracker t;
  std::vector<Traced> traced;
  t.set_trace_hook(
      [&](const TransactionRecord& r, std::vector<TxnRequestSpan>&& requests, uint32_t dropped) {
        traced.push_back({std::string(txn_outcome_name(r.outcome)), std::move(requests), dropped});
      },
      3);
  Client c{t, "long"};
  c.init(9, 0);
  c.add_partitions(9, 0, {{"out", 0}});
  for (int i = 0; i < 5; ++i) c.produce(9, 0, {{"out", 0}}, 1);
  c.produce(9, 0, {{"out", 0}}, 1, error(ErrorCode::kNotEnoughReplicas, "slow-isr"));
  c.end_txn(9, 0, false);
  REQUIRE(traced.size() == 1);
  const auto& r = traced[0].requests;
  REQUIRE(r.size() == 3);         // the bound holds
  CHECK(traced[0].dropped == 5);  // 8 answered requests, 3 kept
  CHECK(r[0].api == TxnApi::kAddPartitionsToTxn);
  CHECK(r[1].injected_by == "slow-isr");
  CHECK(r[2].api == TxnApi::kEndTxn);
}

TEST_CASE("transaction tracker: without a trace hook no requests are kept") {
  TransactionTracker t;
  Client c{t, "untraced"};
  c.init(10, 0);
  c.add_partitions(10, 0, {{"out", 0}});
  c.end_txn(10, 0, true);
  // Setting a hook later sees only what comes after it.
  std::vector<Traced> traced;
  t.set_trace_hook(
      [&](const TransactionRecord& r, std::vector<TxnRequestSpan>&& requests, uint32_t dropped) {
        traced.push_back({std::string(txn_outcome_name(r.outcome)), std::move(requests), dropped});
      },
      8);
  c.add_partitions(10, 0, {{"out", 0}});
  c.end_txn(10, 0, true);
  REQUIRE(traced.size() == 1);
  CHECK(traced[0].requests.size() == 2);
}

// What the client saw, not only what the broker did (docs/transactions.md "What kproxy counts
// under faults"): answers withheld from the client, rewritten by a rule or made by kproxy.

namespace {

/// The broker's answer, withheld from the client (a drop or close-after rule).
TxnResponse lost(TxnResponse r = {}) {
  r.delivered = false;
  return r;
}

/// The broker succeeded; a rule sent the client `e` instead.
TxnResponse rewritten(ErrorCode e, std::string rule = "rule") {
  TxnResponse r = error(e, std::move(rule));
  r.broker_error_code = 0;
  return r;
}

/// kproxy answered in the broker's place with `e`.
TxnResponse answered(ErrorCode e, std::string rule = "rule") {
  TxnResponse r = error(e, std::move(rule));
  r.from_broker = false;
  return r;
}

TxnResponse epoch(int64_t pid, int16_t e) {
  TxnResponse r;
  r.producer_id = pid;
  r.producer_epoch = e;
  return r;
}

std::vector<TxnOutcome> outcomes(const TransactionTracker& t, const std::string& id) {
  std::vector<TxnOutcome> out;
  for (const auto& r : t.history(id)) out.push_back(r.outcome);
  return out;
}

}  // namespace

TEST_CASE("transaction tracker under faults: transaction.version 1, an EndTxn answer lost and the EndTxn sent again is one commit") {
  for (bool commit : {true, false}) {
    CAPTURE(commit);
    for (bool busy_first : {false, true}) {
      CAPTURE(busy_first);
      TransactionTracker t;
      Client c{t, "lost-end"};
      c.init(40, 0);
      c.add_partitions(40, 0, {{"out", 0}});
      c.produce(40, 0, {{"out", 0}}, 3);
      c.end_txn(40, 0, commit, lost());  // the coordinator ended it; the client never heard
      auto h = t.history("lost-end");
      REQUIRE(h.size() == 1);
      CHECK(h[0].outcome == (commit ? TxnOutcome::kCommitted : TxnOutcome::kAborted));
      CHECK_FALSE(h[0].end_acknowledged);
      // On a new connection the client asks again: the coordinator, still writing markers, may
      // answer CONCURRENT_TRANSACTIONS first; then NONE (a retried end of a completed one).
      if (busy_first) c.end_txn(40, 0, commit, error(ErrorCode::kConcurrentTransactions));
      c.end_txn(40, 0, commit);
      h = t.history("lost-end");
      REQUIRE(h.size() == 1);
      CHECK(h[0].end_acknowledged);
      CHECK(h[0].end_retries == (busy_first ? 2u : 1u));
      CHECK(h[0].retries == (busy_first ? 1u : 0u));
      auto s = t.stats(c.now);
      CHECK(s.ended[commit ? TxnOutcome::kCommitted : TxnOutcome::kAborted] == 1);
      CHECK(s.open == 0);
      // The next transaction (same producer id and epoch under transaction.version 1) is new.
      c.add_partitions(40, 0, {{"out", 1}});
      c.end_txn(40, 0, true);
      CHECK(outcomes(t, "lost-end").size() == 2);
      CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == (commit ? 2u : 1u));
    }
  }
}

TEST_CASE("transaction tracker under faults: an EndTxn answer rewritten into a retriable error, then the retry, is one commit") {
  TransactionTracker t;
  Client c{t, "rewritten-end"};
  c.init(41, 0);
  c.add_partitions(41, 0, {{"out", 0}});
  c.end_txn(41, 0, true, rewritten(ErrorCode::kCoordinatorNotAvailable, "flaky-end"));
  c.end_txn(41, 0, true);
  auto h = t.history("rewritten-end");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kCommitted);
  CHECK(h[0].end_retries == 1);
  REQUIRE(h[0].errors.size() == 1);
  CHECK(h[0].errors[0].injected_by == "flaky-end");
  REQUIRE(h[0].errors[0].broker_error_code);
  CHECK(*h[0].errors[0].broker_error_code == 0);
  CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == 1);
}

TEST_CASE("transaction tracker under faults: an EndTxn answer held by a delay whose connection closed is retried as one commit") {
  TransactionTracker t;
  Client c{t, "held-end"};
  c.init(42, 0);
  c.add_partitions(42, 0, {{"out", 0}});
  c.end_txn(42, 0, true);                    // handed in as delivered ...
  t.on_response_withheld(1, c.correlation);  // ... but the client's connection closed before the delay ended
  t.on_connection_closed(1);
  CHECK_FALSE(t.history("held-end")[0].end_acknowledged);
  c.end_txn(42, 0, true);
  auto h = t.history("held-end");
  REQUIRE(h.size() == 1);
  CHECK(h[0].end_retries == 1);
  CHECK(h[0].end_acknowledged);
  CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == 1);
}

TEST_CASE("transaction tracker under faults: transaction.version 2, an EndTxn sent again with the old epoch is one commit") {
  TransactionTracker t;
  Client c{t, "tv2-lost"};
  c.init(43, 0);
  c.produce(43, 0, {{"out", 0}}, 2);
  c.end_txn(43, 0, true, lost(epoch(43, 1)), 5);
  c.end_txn(43, 0, true, epoch(43, 1), 5);  // the retry carries the epoch the client had
  c.produce(43, 1, {{"out", 0}}, 2);
  c.end_txn(43, 1, true, epoch(43, 2), 5);
  CHECK(outcomes(t, "tv2-lost") == std::vector<TxnOutcome>{TxnOutcome::kCommitted, TxnOutcome::kCommitted});
  CHECK(t.history("tv2-lost")[0].end_retries == 1);
  CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == 2);
}

TEST_CASE("transaction tracker under faults: an EndTxn sent again before the first one's answer came is one transaction") {
  // Seen in the conformance matrix (scenario 40, librdkafka): the first EndTxn held 15 s on its
  // way, the client sends it again after its own request timeout, both reach the coordinator and
  // both are answered NONE (a repeated end of a completed transaction). Both protocols, commit and
  // abort, the second answer NONE or CONCURRENT_TRANSACTIONS.
  for (int16_t version : {int16_t{3}, int16_t{5}}) {
    for (bool commit : {true, false}) {
      for (bool busy : {false, true}) {
        CAPTURE(version);
        CAPTURE(commit);
        CAPTURE(busy);
        TransactionTracker t;
        Client c{t, "twice"};
        c.init(45, 0);
        if (version < 5) c.add_partitions(45, 0, {{"out", 0}});
        c.produce(45, 0, {{"out", 0}}, 4);
        const TxnRequest end = c.end_request(45, 0, commit, version);
        const int32_t first = c.send(1, end), again = c.send(1, end, 10s);  // both in flight on the one connection
        const TxnResponse ok = version >= 5 ? epoch(45, 1) : TxnResponse{};
        c.answer(1, first, ok, 15s);
        c.answer(1, again, busy ? error(ErrorCode::kConcurrentTransactions) : ok, 15s + 1ms);
        c.now += 16s;
        auto h = t.history("twice");
        REQUIRE(h.size() == 1);
        CHECK(h[0].outcome == (commit ? TxnOutcome::kCommitted : TxnOutcome::kAborted));
        CHECK(h[0].records == 4);
        CHECK(h[0].end_retries == 1);
        CHECK(h[0].end_acknowledged);
        CHECK(t.stats(c.now).ended[h[0].outcome] == 1);
        CHECK(t.stats(c.now).open == 0);
        // The next transaction is a new one.
        const int16_t next_epoch = version >= 5 ? 1 : 0;
        if (version < 5) c.add_partitions(45, next_epoch, {{"out", 1}});
        c.produce(45, next_epoch, {{"out", 1}}, 2);
        c.end_txn(45, next_epoch, true, version >= 5 ? epoch(45, 2) : TxnResponse{}, version);
        CHECK(t.history("twice").size() == 2);
        CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == (commit ? 2u : 1u));
      }
    }
  }
}

TEST_CASE(
    "transaction tracker under faults: a commit the coordinator accepted after kproxy had called the transaction timed_out is committed") {
  // Seen in conformance scenario 40 (franz-go, a rebalance held the client past its 10 s
  // transaction timeout): kproxy's sweep ends the transaction timed_out at its deadline; the
  // client's EndTxn(commit) comes before the coordinator's own abort check and is answered NONE.
  for (bool in_flight : {false, true}) {
    CAPTURE(in_flight);
    TransactionTracker t;
    Client c{t, "late-commit"};
    c.init(48, 0, /*timeout_ms=*/10000);
    c.add_partitions(48, 0, {{"out", 0}});
    c.produce(48, 0, {{"out", 0}}, 3);
    const TxnRequest end = c.end_request(48, 0, true);
    int32_t corr = in_flight ? c.send(1, end) : 0;  // sent before the deadline, answered after it
    c.now += 11s;
    t.sweep(c.now);
    REQUIRE(t.history("late-commit").size() == 1);
    CHECK(t.history("late-commit")[0].outcome == TxnOutcome::kTimedOut);
    if (!in_flight) corr = c.send(1, end);
    c.answer(1, corr, {});
    auto h = t.history("late-commit");
    REQUIRE(h.size() == 1);
    CHECK(h[0].outcome == TxnOutcome::kCommitted);
    CHECK(h[0].records == 3);
    auto st = t.stats(c.now);
    CHECK(st.ended[TxnOutcome::kCommitted] == 1);
    CHECK(st.ended[TxnOutcome::kTimedOut] == 0);
  }
  // A late abort answered without error stays timed_out.
  TransactionTracker t;
  Client c{t, "late-abort"};
  c.init(49, 0, 10000);
  c.add_partitions(49, 0, {{"out", 0}});
  c.now += 11s;
  t.sweep(c.now);
  c.end_txn(49, 0, false);
  CHECK(t.history("late-abort")[0].outcome == TxnOutcome::kTimedOut);
}

TEST_CASE("transaction tracker under faults: transaction.version 1, a late EndTxn of the transaction before ends the one open now") {
  // What conformance scenario 40 showed with franz-go: EndTxn(commit) of transaction 1 held on its
  // way; after its request timeout the client sends it again on a new connection (committed), goes
  // on with transaction 2 (partitions added), and then the held request reaches the coordinator,
  // which commits transaction 2 with it. The client's own EndTxn for transaction 2 is refused
  // INVALID_TXN_STATE.
  TransactionTracker t;
  Client c{t, "late-end"};
  c.init(50, 0);
  c.add_partitions(50, 0, {{"out", 0}});
  c.produce(50, 0, {{"out", 0}}, 3);
  const TxnRequest end = c.end_request(50, 0, true);
  const int32_t held = c.send(1, end);  // connection 1: held by a delay
  c.now += 10s;
  c.answer(3, c.send(3, end), {});  // the client's retry on a new connection
  c.coordinator = 3;
  c.add_partitions(50, 0, {{"out", 1}});  // transaction 2, at the coordinator now
  c.produce(50, 0, {{"out", 1}}, 4);
  c.answer(1, held, {});  // the held one arrives: it commits transaction 2
  auto h = t.history("late-end");
  REQUIRE(h.size() == 2);
  CHECK(h[0].outcome == TxnOutcome::kCommitted);
  CHECK(h[1].outcome == TxnOutcome::kCommitted);
  CHECK(h[1].records == 4);
  CHECK_FALSE(h[1].end_acknowledged);
  // The client, not knowing, aborts transaction 2: refused, and kept with it.
  c.end_txn(50, 0, false, error(ErrorCode::kInvalidTxnState));
  h = t.history("late-end");
  REQUIRE(h.size() == 2);
  CHECK(h[1].outcome == TxnOutcome::kCommitted);
  CHECK(h[1].end_retries == 1);
  CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == 2);
  CHECK(t.stats(c.now).open == 0);
}

TEST_CASE(
    "transaction tracker under faults: transaction.version 1, a late EndTxn before the next transaction reached the coordinator ends "
    "nothing new") {
  TransactionTracker t;
  Client c{t, "late-end-early"};
  c.init(51, 0);
  c.add_partitions(51, 0, {{"out", 0}});
  const TxnRequest end = c.end_request(51, 0, true);
  const int32_t held = c.send(1, end);
  c.answer(3, c.send(3, end, 10s), {}, 10s);
  c.answer(1, held, {}, 11s);  // nothing of a next transaction yet: a repeated end
  auto h = t.history("late-end-early");
  REQUIRE(h.size() == 1);
  CHECK(h[0].end_retries == 1);
  CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == 1);
}

TEST_CASE("transaction tracker under faults: after a lost EndTxn answer, two retries in flight at once are still one commit") {
  // Found by the model test (kSentTwice after kHeldThenClosed): the first retry's answer tells the
  // client; the second, sent before it came, must not start a transaction kproxy never saw begin.
  TransactionTracker t;
  Client c{t, "two-retries"};
  c.init(47, 0);
  c.add_partitions(47, 0, {{"out", 0}});
  c.end_txn(47, 0, true, lost());
  const TxnRequest again = c.end_request(47, 0, true);
  const int32_t a = c.send(2, again), b = c.send(2, again);
  c.answer(2, a, {});
  c.answer(2, b, {});
  auto h = t.history("two-retries");
  REQUIRE(h.size() == 1);
  CHECK(h[0].end_retries == 2);
  CHECK(h[0].end_acknowledged);
  CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == 1);
}

TEST_CASE("transaction tracker under faults: a zombie's EndTxn answered after the new instance's transaction ended is not its retry") {
  TransactionTracker t;
  Client c{t, "zombie-late-end"};
  c.init(46, 0);
  c.add_partitions(46, 0, {{"out", 0}});
  // The new instance takes the id (epoch 1) and commits a transaction while the old instance's
  // EndTxn waits on another connection; that one is then refused as fenced.
  c.init(46, 1);
  c.add_partitions(46, 1, {{"out", 1}});
  const int32_t held = c.send(3, c.end_request(46, 0, true));
  c.end_txn(46, 1, true);
  c.answer(3, held, error(ErrorCode::kProducerFenced));
  auto h = t.history("zombie-late-end");
  REQUIRE(h.size() == 2);
  CHECK(h[1].outcome == TxnOutcome::kCommitted);
  CHECK(h[1].end_retries == 0);  // the zombie's request is not the new transaction's retry
  CHECK(t.stats(c.now).ended[TxnOutcome::kCommitted] == 1);
}

TEST_CASE("transaction tracker under faults: a transaction whose start kproxy did not see counts once, commit or abort") {
  for (bool commit : {true, false}) {
    CAPTURE(commit);
    TransactionTracker t;
    Client c{t, "unseen"};
    c.end_txn(44, 3, commit);  // kproxy started mid-transaction: only its end passes
    auto h = t.history("unseen");
    REQUIRE(h.size() == 1);
    CHECK(h[0].outcome == (commit ? TxnOutcome::kCommitted : TxnOutcome::kAborted));
    CHECK(h[0].producer_id == 44);
    CHECK(t.stats(c.now).ended[h[0].outcome] == 1);
  }
}

TEST_CASE("transaction tracker under faults: refused, the next one refused without EndTxn, then a commit: three transactions") {
  TransactionTracker t;
  Client c{t, "refusals"};
  c.init(45, 0);
  c.add_partitions(45, 0, {{"out", 0}}, error(ErrorCode::kTopicAuthorizationFailed));  // the coordinator refuses
  // The client's next transaction: its AddPartitionsToTxn retried, then refused by a rule.
  c.add_partitions(45, 0, {{"out", 1}}, error(ErrorCode::kConcurrentTransactions));
  c.add_partitions(45, 0, {{"out", 1}}, answered(ErrorCode::kTopicAuthorizationFailed, "deny-out"));
  // The one after: it goes through and commits.
  c.add_partitions(45, 0, {{"out", 2}});
  c.produce(45, 0, {{"out", 2}}, 4);
  c.end_txn(45, 0, true);

  auto h = t.history("refusals");
  REQUIRE(h.size() == 3);
  CHECK(h[0].outcome == TxnOutcome::kAborted);
  CHECK(h[0].partitions == std::set<TopicPartition>{{"out", 0}});
  REQUIRE(h[0].cause);
  CHECK(h[0].cause->injected_by.empty());
  CHECK(h[1].outcome == TxnOutcome::kAborted);
  CHECK(h[1].partitions == std::set<TopicPartition>{{"out", 1}});
  REQUIRE(h[1].cause);
  CHECK(h[1].cause->injected_by == "deny-out");
  CHECK(h[1].retries == 1);
  CHECK(h[2].outcome == TxnOutcome::kCommitted);
  CHECK(h[2].partitions == std::set<TopicPartition>{{"out", 2}});
  CHECK(h[2].records == 4);
  CHECK_FALSE(h[2].cause);
  CHECK(h[2].errors.empty());
  CHECK(h[1].begin < h[2].begin);
}

TEST_CASE("transaction tracker under faults: a broker answer is still matched after kproxy answered a later request itself") {
  TransactionTracker t;
  Client c{t, "mixed"};
  c.init(46, 0);
  c.add_partitions(46, 0, {{"out", 0}});
  // EndTxn goes to the broker; a second request on the same connection is answered by kproxy at once.
  TxnRequest end = c.request(TxnApi::kEndTxn, 46, 0);
  end.commit = true;
  end.api_version = 3;
  t.on_request(1, 700, end, c.now);
  TxnRequest offsets = c.request(TxnApi::kAddOffsetsToTxn, 46, 0);
  offsets.group_id = "g";
  offsets.reached_broker = false;
  t.on_request(1, 701, offsets, c.now);
  TxnResponse mine = answered(ErrorCode::kCoordinatorNotAvailable);
  mine.api = TxnApi::kAddOffsetsToTxn;
  t.on_response(1, 701, mine, c.now);
  CHECK(t.awaiting_responses());
  TxnResponse done;
  done.api = TxnApi::kEndTxn;
  t.on_response(1, 700, done, c.now);  // the broker's answer to the earlier one
  CHECK(outcomes(t, "mixed") == std::vector<TxnOutcome>{TxnOutcome::kCommitted});
  CHECK(t.history("mixed")[0].groups.empty());  // kproxy's answer added no group at the coordinator
}

TEST_CASE("transaction tracker under faults: a request kproxy answered adds nothing the broker did not see") {
  TransactionTracker t;
  Client c{t, "answered"};
  c.init(47, 0);
  TxnRequest add = c.request(TxnApi::kAddPartitionsToTxn, 47, 0);
  add.partitions = {{"out", 0}};
  add.api_version = 3;
  add.reached_broker = false;
  c.exchange(1, add, answered(ErrorCode::kCoordinatorLoadInProgress));
  TxnRequest produce = c.request(TxnApi::kProduce, 47, 0);
  produce.partitions = {{"out", 0}};
  produce.records = 9;
  produce.reached_broker = false;
  c.exchange(2, produce, answered(ErrorCode::kNotLeaderOrFollower));
  c.add_partitions(47, 0, {{"out", 1}});
  c.produce(47, 0, {{"out", 1}}, 2);
  c.end_txn(47, 0, true);
  auto h = t.history("answered");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kCommitted);
  CHECK(h[0].transaction_version == 1);
  CHECK(h[0].partitions == std::set<TopicPartition>{{"out", 1}});
  CHECK(h[0].records == 2);
  CHECK(h[0].retries == 2);
}

TEST_CASE("transaction tracker under faults: an InitProducerId answer lost and asked again is no new instance") {
  TransactionTracker t;
  Client c{t, "init-lost"};
  c.init(48, 0);
  c.add_partitions(48, 0, {{"out", 0}});
  c.end_txn(48, 0, true);
  // The client restarts its producer: the first InitProducerId answer is lost, the second arrives.
  TxnRequest again = c.request(TxnApi::kInitProducerId);
  c.exchange(1, again, lost(epoch(48, 1)));
  c.exchange(1, c.request(TxnApi::kInitProducerId), epoch(48, 2));
  auto s = t.stats(c.now);
  CHECK(s.fencing_events == 1);  // the restart fenced the old instance once; the retry fenced nothing
  CHECK(s.ended[TxnOutcome::kFenced] == 0);
  c.add_partitions(48, 2, {{"out", 0}});
  c.end_txn(48, 2, true);
  CHECK(outcomes(t, "init-lost") == std::vector<TxnOutcome>{TxnOutcome::kCommitted, TxnOutcome::kCommitted});
}

TEST_CASE("transaction tracker under faults: a KIP-360 bump answered twice (its first answer lost) is one bump") {
  TransactionTracker t;
  Client c{t, "bump-twice"};
  c.init(49, 0);
  c.add_partitions(49, 0, {{"out", 0}});
  c.init(49, 1, 60000, 49, 0);  // bumps: aborts the open one
  c.init(49, 1, 60000, 49, 0);  // the same request again: the coordinator gives the same epoch
  auto s = t.stats(c.now);
  CHECK(s.epoch_bumps == 1);
  CHECK(s.ended[TxnOutcome::kAborted] == 1);
}

TEST_CASE("transaction tracker under faults: a rule's refusal of a successful AddPartitionsToTxn and the coordinator's own") {
  for (bool by_rule : {true, false}) {
    CAPTURE(by_rule);
    TransactionTracker t;
    Client c{t, "refusal-kinds"};
    c.init(50, 0);
    c.add_partitions(50, 0, {{"out", 0}},
                     by_rule ? rewritten(ErrorCode::kTopicAuthorizationFailed, "deny") : error(ErrorCode::kTopicAuthorizationFailed));
    // Either way the client saw a refusal before anything got in: it aborts without EndTxn.
    auto h = t.history("refusal-kinds");
    REQUIRE(h.size() == 1);
    CHECK(h[0].outcome == TxnOutcome::kAborted);
    CHECK(h[0].known_to_coordinator == by_rule);  // the rule's: the coordinator has it open all the same
    CHECK_FALSE(h[0].client_saw_registration);
    REQUIRE(h[0].cause);
    CHECK(h[0].cause->injected_by == (by_rule ? "deny" : ""));
    CHECK(h[0].cause->broker_error_code == (by_rule ? std::optional<int16_t>(0) : std::nullopt));
    CHECK(t.stats(c.now).abort_causes[{"TOPIC_AUTHORIZATION_FAILED", by_rule}] == 1);
    // Its next transaction is the client's next one.
    c.add_partitions(50, 0, {{"out", 1}});
    c.produce(50, 0, {{"out", 1}}, 1);
    c.end_txn(50, 0, true);
    CHECK(outcomes(t, "refusal-kinds") == std::vector<TxnOutcome>{TxnOutcome::kAborted, TxnOutcome::kCommitted});
  }
  // A refusal after the client saw a partition go in does not end it: the client ends it with EndTxn.
  TransactionTracker t;
  Client c{t, "late-refusal"};
  c.init(51, 0);
  c.add_partitions(51, 0, {{"out", 0}});
  c.add_partitions(51, 0, {{"out", 1}}, rewritten(ErrorCode::kTopicAuthorizationFailed, "deny"));
  CHECK(t.stats(c.now).open == 1);
  c.end_txn(51, 0, false);
  CHECK(outcomes(t, "late-refusal") == std::vector<TxnOutcome>{TxnOutcome::kAborted});
}

TEST_CASE(
    "transaction tracker under faults: an id forgotten at max_ids keeps its producer: its zombie and a retried EndTxn begin nothing") {
  TransactionTracker::Limits limits;
  limits.max_ids = 1;
  TransactionTracker t(limits);
  Client a{t, "evicted"};
  a.init(52, 0);
  a.add_partitions(52, 0, {{"out", 0}});
  a.end_txn(52, 0, true, lost());  // the coordinator committed; the client did not hear
  Client b{t, "other", a.now};
  b.init(53, 0);  // takes the only slot: "evicted" is forgotten
  CHECK(t.history("evicted").empty());
  a.now = b.now;
  a.end_txn(52, 0, true);  // the retry: part of the commit it repeats
  auto h = t.history("evicted");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kCommitted);
  CHECK(h[0].end_retries == 1);
  CHECK(t.stats(a.now).ended[TxnOutcome::kCommitted] == 1);
  // A new instance fenced the old producer (epoch 1); forgotten again, the zombie's Produce with epoch 0 begins nothing.
  a.init(52, 1);
  b.now = a.now;
  b.add_partitions(53, 0, {{"out", 0}});
  b.end_txn(53, 0, true);
  t.on_connection_closed(1);
  Client c{t, "third", b.now};
  c.init(54, 0);  // "evicted" forgotten once more
  a.now = c.now;
  a.produce(52, 0, {{"out", 5}}, 3, error(ErrorCode::kInvalidProducerEpoch));
  CHECK(t.stats(a.now).open == 0);
  for (const auto& r : t.history("evicted")) CHECK(r.outcome != TxnOutcome::kOpen);
}

TEST_CASE(
    "transaction tracker under faults: a commit in flight when a new instance's InitProducerId is answered is committed, not fenced") {
  for (bool tv2 : {false, true}) {
    for (bool init_answered_first : {false, true}) {
      CAPTURE(tv2);
      CAPTURE(init_answered_first);
      TransactionTracker t;
      Client old{t, "handover"};
      old.init(60, 0);
      if (tv2) old.produce(60, 0, {{"out", 0}}, 2);
      else old.add_partitions(60, 0, {{"out", 0}});
      TxnRequest end = old.request(TxnApi::kEndTxn, 60, 0);
      end.commit = true;
      end.api_version = tv2 ? 5 : 3;
      t.on_request(1, 900, end, old.now);
      // The new instance asks while the coordinator completes the commit: CONCURRENT_TRANSACTIONS.
      Client fresh{t, "handover", old.now, 500};
      TxnResponse busy = error(ErrorCode::kConcurrentTransactions);
      fresh.exchange(7, fresh.request(TxnApi::kInitProducerId), busy);
      TxnResponse committed = tv2 ? epoch(60, 1) : TxnResponse{};
      committed.api = TxnApi::kEndTxn;
      if (!init_answered_first) t.on_response(1, 900, committed, fresh.now);
      fresh.exchange(7, fresh.request(TxnApi::kInitProducerId), epoch(60, tv2 ? 2 : 1));
      if (init_answered_first) t.on_response(1, 900, committed, fresh.now);
      CHECK(outcomes(t, "handover") == std::vector<TxnOutcome>{TxnOutcome::kCommitted});
      auto s = t.stats(fresh.now);
      CHECK(s.ended[TxnOutcome::kFenced] == 0);
      CHECK(s.fencing_events == 1);
      // The new instance's own transaction follows, with its epoch.
      int16_t e = tv2 ? 2 : 1;
      if (tv2) fresh.produce(60, e, {{"out", 1}}, 1);
      else fresh.add_partitions(60, e, {{"out", 1}});
      fresh.end_txn(60, e, true, tv2 ? epoch(60, 3) : TxnResponse{}, tv2 ? 5 : 3);
      CHECK(outcomes(t, "handover") == std::vector<TxnOutcome>{TxnOutcome::kCommitted, TxnOutcome::kCommitted});
    }
  }
  // The EndTxn's answer never comes (its connection closed): the new instance fenced it.
  TransactionTracker t;
  Client old{t, "handover"};
  old.init(61, 0);
  old.add_partitions(61, 0, {{"out", 0}});
  TxnRequest end = old.request(TxnApi::kEndTxn, 61, 0);
  end.commit = true;
  t.on_request(1, 900, end, old.now);
  Client fresh{t, "handover", old.now, 500};
  fresh.exchange(7, fresh.request(TxnApi::kInitProducerId), epoch(61, 1));
  CHECK(t.stats(fresh.now).open == 1);
  t.on_connection_closed(1);
  CHECK(outcomes(t, "handover") == std::vector<TxnOutcome>{TxnOutcome::kFenced});
}

TEST_CASE("transaction tracker under faults: a Produce error that arrives after its transaction ended is not the next one's") {
  TransactionTracker t;
  Client c{t, "late-produce"};
  c.init(62, 0);
  c.add_partitions(62, 0, {{"out", 0}});
  TxnRequest slow = c.request(TxnApi::kProduce, 62, 0);
  slow.partitions = {{"out", 0}};
  slow.records = 1;
  t.on_request(2, 800, slow, c.now);
  c.end_txn(62, 0, false);
  c.add_partitions(62, 0, {{"out", 1}});  // the next transaction has begun
  TxnResponse late = error(ErrorCode::kNotEnoughReplicas);
  late.api = TxnApi::kProduce;
  t.on_response(2, 800, late, c.now);
  c.end_txn(62, 0, true);
  auto h = t.history("late-produce");
  REQUIRE(h.size() == 2);
  CHECK(h[0].errors.size() == 1);
  CHECK(h[1].errors.empty());
  CHECK(h[1].retries == 0);
  CHECK_FALSE(h[1].cause);
}

TEST_CASE("transaction tracker: recent_ended lists the ended transactions of every id, newest first, bounded") {
  TransactionTracker::Limits limits;
  limits.history_per_id = 3;
  TransactionTracker tracker(limits);
  Client a{tracker, "orders"};
  Client b{tracker, "payments"};
  a.init(7, 0);
  b.now = a.now;
  b.init(8, 0);
  CHECK(tracker.recent_ended(10).empty());
  // orders commits 4 transactions, payments 2 (one aborted), interleaved in time.
  for (int i = 0; i < 4; ++i) {
    a.now += 10ms;
    a.add_partitions(7, 0, {{"out", i}});
    a.produce(7, 0, {{"out", i}}, 5);
    a.end_txn(7, 0, true);
    if (i < 2) {
      b.now = a.now + 5ms;
      b.add_partitions(8, 0, {{"pay", 0}});
      b.produce(8, 0, {{"pay", 0}}, 1);
      b.end_txn(8, 0, i == 0);
    }
  }
  a.now += 10ms;
  a.add_partitions(7, 0, {{"out", 9}});  // open: not listed

  auto all = tracker.recent_ended(100);
  // orders keeps its last 3 (history_per_id), payments its 2.
  REQUIRE(all.size() == 5);
  for (size_t i = 1; i < all.size(); ++i) CHECK(all[i - 1].end >= all[i].end);
  CHECK(all[0].transactional_id == "orders");
  CHECK(all[0].partitions == std::set<TopicPartition>{{"out", 3}});
  CHECK(all[1].transactional_id == "orders");
  CHECK(all[1].partitions == std::set<TopicPartition>{{"out", 2}});
  CHECK(all[2].transactional_id == "payments");
  CHECK(all[2].outcome == TxnOutcome::kAborted);
  CHECK(all[3].transactional_id == "orders");
  CHECK(all[3].partitions == std::set<TopicPartition>{{"out", 1}});
  CHECK(all[4].transactional_id == "payments");
  CHECK(all[4].outcome == TxnOutcome::kCommitted);
  for (const auto& t : all) CHECK(t.outcome != TxnOutcome::kOpen);

  auto two = tracker.recent_ended(2);
  REQUIRE(two.size() == 2);
  CHECK(two[0].partitions == all[0].partitions);
  CHECK(two[1].partitions == all[1].partitions);
  CHECK(tracker.recent_ended(0).empty());
}

TEST_CASE("transaction tracker: a batch resent after a lost Produce answer counts its records once (same base sequence, KIP-98)") {
  // Seen in the conformance matrix (network scenarios 30, 32, 33: reset, close after, blackhole on
  // Produce): the client resends the batch whose answer it did not get; the broker writes it once.
  TransactionTracker t;
  Client c{t, "orders"};
  c.init(7, 0);
  c.add_partitions(7, 0, {{"out", 0}, {"out", 1}});
  uint64_t connection = 2;  // the partition leader's connection; a resend comes on a new one
  auto produce = [&](std::vector<std::pair<int32_t, int32_t>> partition_sequence, uint64_t per_batch) {
    TxnRequest r = c.request(TxnApi::kProduce, 7, 0);
    for (auto [partition, sequence] : partition_sequence) {
      r.partitions.push_back({"out", partition});
      r.batches.push_back({{"out", partition}, sequence, per_batch});
      r.records += per_batch;
    }
    r.bytes = r.records * 100;
    c.exchange(connection, std::move(r));
  };
  produce({{0, 0}, {1, 0}}, 5);  // 10 records
  connection = 12;               // reset before the answer: the client resends on a new connection
  produce({{0, 0}, {1, 0}}, 5);  // nothing new
  produce({{0, 5}}, 3);          // the next batch of partition 0
  connection = 22;
  produce({{0, 5}, {1, 5}}, 3);  // partition 0's resent, partition 1's new
  REQUIRE(t.open_transactions().size() == 1);
  CHECK(t.open_transactions()[0].records == 16);
  c.end_txn(7, 0, true);
  // The next transaction counts its own batches, whatever sequences the last one had.
  c.add_partitions(7, 0, {{"out", 0}});
  produce({{0, 0}}, 4);
  c.end_txn(7, 0, true);
  auto h = t.history("orders");
  REQUIRE(h.size() == 2);
  CHECK(h[0].records == 16);  // oldest first
  CHECK(h[1].records == 4);
  // The same batch again on the same connection (a load generator repeating one template) counts.
  c.add_partitions(7, 0, {{"out", 0}});
  connection = 2;
  produce({{0, 0}}, 1);
  produce({{0, 0}}, 1);
  REQUIRE(t.open_transactions().size() == 1);
  CHECK(t.open_transactions()[0].records == 2);
  c.end_txn(7, 0, true);
  // Without batch details (an older message format), every record counts as before.
  c.add_partitions(7, 0, {{"out", 0}});
  c.produce(7, 0, {{"out", 0}}, 6);
  c.produce(7, 0, {{"out", 0}}, 6);
  REQUIRE(t.open_transactions().size() == 1);
  CHECK(t.open_transactions()[0].records == 12);
}

TEST_CASE("transaction tracker under faults: a fencing answer to a Produce does not end the transaction; the client's EndTxn does") {
  // Conformance scenario 11: one Produce is answered INVALID_PRODUCER_EPOCH (by a fault rule, or by
  // the partition leader). The coordinator still has the transaction. franz-go, Sarama and the
  // Java 3.x client go on (more records), abort it with EndTxn, answered NONE, and go on with the
  // next: two transactions, the first aborted with that cause; not a fenced one and another.
  for (bool from_broker : {false, true}) {
    CAPTURE(from_broker);
    TransactionTracker t;
    Client c{t, "goes-on"};
    c.init(50, 0);
    c.add_partitions(50, 0, {{"out", 0}});
    c.produce(50, 0, {{"out", 0}}, 2);
    if (from_broker) {
      c.produce(50, 0, {{"out", 0}}, 3, error(ErrorCode::kInvalidProducerEpoch));
    } else {  // a rule answered in the broker's place: the batch never reached it
      TxnRequest produce = c.request(TxnApi::kProduce, 50, 0);
      produce.partitions = {{"out", 0}};
      produce.records = 3;
      produce.reached_broker = false;
      c.exchange(1, produce, answered(ErrorCode::kInvalidProducerEpoch));
    }
    CHECK(t.stats(c.now).ended[TxnOutcome::kFenced] == 0);  // still open at the coordinator
    c.produce(50, 0, {{"out", 1}}, 2);
    c.end_txn(50, 0, false);
    auto h = t.history("goes-on");
    REQUIRE(h.size() == 1);
    CHECK(h[0].outcome == TxnOutcome::kAborted);
    CHECK(h[0].records == (from_broker ? 7u : 4u));  // a refused batch the broker saw counts, as for any Produce
    REQUIRE(h[0].cause.has_value());
    CHECK(h[0].cause->error_code == code(ErrorCode::kInvalidProducerEpoch));
    c.add_partitions(50, 0, {{"out", 1}});
    c.produce(50, 0, {{"out", 1}}, 4);
    c.end_txn(50, 0, true);
    h = t.history("goes-on");
    REQUIRE(h.size() == 2);
    CHECK(h[1].outcome == TxnOutcome::kCommitted);
    CHECK(h[1].records == 4);
    auto st = t.stats(c.now);
    CHECK(st.ended[TxnOutcome::kAborted] == 1);
    CHECK(st.ended[TxnOutcome::kCommitted] == 1);
    CHECK(st.ended[TxnOutcome::kFenced] == 0);
  }
}

TEST_CASE("transaction tracker under faults: a client that gives up after a fencing answer: fenced when its connection closes") {
  // The Java 4.x client treats the answer as fatal and closes the producer.
  TransactionTracker t;
  Client c{t, "gives-up"};
  c.init(53, 0);
  c.add_partitions(53, 0, {{"out", 0}});
  c.produce(53, 0, {{"out", 0}}, 2, error(ErrorCode::kProducerFenced));
  CHECK(t.stats(c.now).ended[TxnOutcome::kFenced] == 0);
  t.on_connection_closed(c.coordinator);  // another connection of the client: nothing yet
  CHECK(t.stats(c.now).ended[TxnOutcome::kFenced] == 0);
  t.on_connection_closed(2);  // the one the answer came on (Client::produce's)
  auto h = t.history("gives-up");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kFenced);
  REQUIRE(h[0].cause.has_value());
  CHECK(h[0].cause->error_code == code(ErrorCode::kProducerFenced));
}

TEST_CASE("transaction tracker under faults: a client that reconnects after a fencing answer and aborts: one aborted transaction") {
  // Sarama (conformance scenario 11, transaction.version 1) closes its connections after
  // INVALID_PRODUCER_EPOCH and comes back on new ones to abort with the same producer id and epoch.
  TransactionTracker t;
  Client c{t, "reconnects"};
  c.init(54, 0);
  c.add_partitions(54, 0, {{"out", 0}});
  c.produce(54, 0, {{"out", 0}}, 2, error(ErrorCode::kInvalidProducerEpoch));
  t.on_connection_closed(2);
  t.on_connection_closed(c.coordinator);
  c.coordinator = 7;
  c.end_txn(54, 0, false);
  auto h = t.history("reconnects");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kAborted);
  CHECK(h[0].end_retries == 1);
  auto st = t.stats(c.now);
  CHECK(st.ended[TxnOutcome::kAborted] == 1);
  CHECK(st.ended[TxnOutcome::kFenced] == 0);
}

TEST_CASE("transaction tracker under faults: a fencing answer past the timeout, then the client's abort: one timed_out transaction") {
  TransactionTracker t;
  Client c{t, "late-epoch"};
  c.init(51, 1, /*timeout_ms=*/10000);
  c.add_partitions(51, 1, {{"out", 0}});
  c.produce(51, 1, {{"out", 0}}, 10);
  c.now += 12s;
  c.produce(51, 1, {{"out", 0}}, 1, error(ErrorCode::kInvalidProducerEpoch));
  c.end_txn(51, 1, false);  // transaction.version 2 answers a late abort NONE after the timeout abort too
  auto h = t.history("late-epoch");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kTimedOut);
  CHECK(h[0].end_retries == 1);
}

TEST_CASE("transaction tracker under faults: a fenced producer's EndTxn refused by the coordinator leaves it fenced") {
  TransactionTracker t;
  Client c{t, "really-fenced"};
  c.init(52, 0);
  c.add_partitions(52, 0, {{"out", 0}});
  c.produce(52, 0, {{"out", 0}}, 1, error(ErrorCode::kProducerFenced));
  c.end_txn(52, 0, false, error(ErrorCode::kProducerFenced));
  auto h = t.history("really-fenced");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kFenced);
}

TEST_CASE("transaction tracker under faults: a Produce kproxy answered on a partition the transaction has adds no record") {
  // Conformance scenario 17 with the Java 4.4 client (transaction.version 2): the second Produce to
  // a partition is answered UNKNOWN_PRODUCER_ID by a rule, the client sends the batch again (a new
  // request, answered by the broker) and commits: 10 records, not 14. The second Produce went the
  // per-connection fast path (same partitions as the last one), which counted its records.
  TransactionTracker t;
  Client c{t, "answered-fast"};
  c.init(55, 0);
  c.produce(55, 0, {{"out", 1}}, 1);
  TxnRequest refused = c.request(TxnApi::kProduce, 55, 0);
  refused.partitions = {{"out", 1}};
  refused.records = 4;
  refused.reached_broker = false;
  c.exchange(2, refused, answered(ErrorCode::kUnknownProducerId));
  c.produce(55, 0, {{"out", 2}}, 3);
  c.produce(55, 0, {{"out", 1}}, 4);  // sent again, reaches the broker
  c.produce(55, 0, {{"out", 0}}, 2);
  c.end_txn(55, 0, true);
  auto h = t.history("answered-fast");
  REQUIRE(h.size() == 1);
  CHECK(h[0].outcome == TxnOutcome::kCommitted);
  CHECK(h[0].records == 10);
}
