// TransactionTracker: every transaction that crosses kproxy, rebuilt from the requests and
// responses of the transaction APIs (docs/transactions.md).
//
// The tracker knows nothing of frames: it takes TxnRequest / TxnResponse events, which the
// frame observer makes from the decoded InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit, EndTxn and transactional Produce requests and their responses. A response is
// matched with its request by (connection, correlation id), so the events of one transactional.id
// may come from any connection of any worker: a producer talks to its coordinator on one
// connection and to the partition leaders on others, and may reconnect in the middle of a
// transaction.
//
// Per transactional.id it keeps the producer id and epoch, the open transaction (begun by the
// first AddPartitionsToTxn or transactional Produce after InitProducerId or the last EndTxn; under
// transaction.version 2, KIP-890, clients send no AddPartitionsToTxn and the partitions come from
// the Produce requests) and a bounded history of ended ones. Memory is bounded: at most
// `max_ids` ids and `history_per_id` ended transactions per id; what does not fit is counted
// (TransactionStats::untracked).
//
// Thread-safe: workers call it from their loop threads; one mutex, taken only for the frames of
// the transaction APIs and transactional Produce (never for other traffic).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "proxy/cluster/topic_names.h"
#include "proxy/observe/counted_batches.h"
#include "proxy/util/clock.h"
#include "proxy/util/ring_queue.h"

namespace kproxy::observe {

using TxnClock = std::chrono::steady_clock;

/// The transaction API a request belongs to.
enum class TxnApi : uint8_t { kInitProducerId, kAddPartitionsToTxn, kAddOffsetsToTxn, kTxnOffsetCommit, kProduce, kEndTxn };
std::string_view txn_api_name(TxnApi api);

/// How a transaction ended (`open` while it has not).
enum class TxnOutcome : uint8_t {
  kOpen,
  kCommitted,
  kAborted,
  kFenced,    ///< its producer was fenced (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH, or a new InitProducerId)
  kTimedOut,  ///< open longer than its transaction.timeout.ms: the coordinator aborts it
  kUnknown,   ///< the client went silent without ending it and without a known timeout
};
std::string_view txn_outcome_name(TxnOutcome outcome);

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  auto operator<=>(const TopicPartition&) const = default;
};

/// A partition as a request names it, viewed in the frame: by topic name, or (Produce v13+,
/// TxnOffsetCommit v6+: KIP-516) by topic id with `topic` empty. The tracker turns it into a
/// TopicPartition (the name kproxy learnt from Metadata, else the id as Kafka prints it) only
/// when the transaction does not have it yet.
struct PartitionRef {
  std::string_view topic;
  int32_t partition = 0;
  std::array<uint8_t, 16> topic_id{};  ///< codec::Uuid; all zero when named
  bool operator==(const PartitionRef&) const = default;
};

/// One record batch of a transactional Produce (the first of a partition's record set): an
/// idempotent producer resends a batch whose answer it did not get with the same base sequence
/// (KIP-98), and the broker writes it once; the tracker counts its records once.
struct ProducedBatch {
  PartitionRef partition;
  int32_t base_sequence = -1;
  uint64_t records = 0;  ///< every record of the partition's record set
};

/// Who sent a request: what a transaction records of its client.
struct TxnClient {
  std::string transactional_id, listener, client_id, client_software;
};

/// A request of a transaction API, as the frame observer read it. The strings are views into
/// the frame and its connection: valid for the on_request call only (the tracker copies what
/// it keeps). txn_request() resets it field by field (a new field is reset there too).
struct TxnRequest {
  TxnApi api = TxnApi::kProduce;
  int16_t api_version = 0;
  std::string_view transactional_id;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  std::vector<PartitionRef> partitions;  ///< AddPartitionsToTxn, Produce, TxnOffsetCommit
  std::string_view group_id;             ///< AddOffsetsToTxn, TxnOffsetCommit
  bool commit = false;                   ///< EndTxn
  int32_t transaction_timeout_ms = -1;   ///< InitProducerId
  uint64_t records = 0, bytes = 0;       ///< Produce: records and record-batch bytes
  /// Produce: the partitions' first batches with their base sequence, when readable; their
  /// records are part of `records`. Empty when not known (then `records` counts as it is).
  std::vector<ProducedBatch> batches;
  std::string_view listener, client_id, client_software;
  /// False when kproxy answered the request itself (a fault rule's `answer`): the broker never
  /// saw it, so it adds no partitions, records or offsets at the coordinator. A request that a
  /// rule closed the connection on before forwarding is not handed to the tracker at all.
  bool reached_broker = true;
};

/// Its response: the first non-zero error code the client is sent (0 when none), the producer id
/// and epoch the broker gave (InitProducerId; EndTxn v5+ under transaction.version 2), and the
/// fault rule that injected the error or answered the request, if one did.
///
/// What the broker did and what the client saw can differ under fault rules, and the tracker
/// needs both (docs/transactions.md "What kproxy counts under faults"): the coordinator's state
/// follows the broker's own answer, the client's next step follows what reached it.
struct TxnResponse {
  TxnApi api = TxnApi::kProduce;  ///< the API answered
  int16_t error_code = 0;         ///< as sent to the client
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  std::string injected_by;
  /// False for kproxy's own answer (a fault rule's `answer`): the broker never saw the request.
  bool from_broker = true;
  /// The broker's own first error when a fault rule rewrote the answer (error_code is then the
  /// rule's); unset when nothing rewrote it (the broker said error_code).
  std::optional<int16_t> broker_error_code;
  /// False when the answer does not reach the client: a rule dropped it (or an earlier one,
  /// blackholing the connection), closes the connection in its place, or resets the connection
  /// before its last byte. Such an answer still tells what the broker did.
  bool delivered = true;
  /// What the coordinator (or partition leader) answered: the broker's code, or for kproxy's own
  /// answer nothing happened there (-1).
  int16_t broker_code() const { return !from_broker ? int16_t{-1} : broker_error_code ? *broker_error_code : error_code; }
};

/// One error seen in a transaction.
struct TxnError {
  TxnApi api = TxnApi::kProduce;
  int16_t error_code = 0;
  std::string injected_by;  ///< the fault rule, or "" when the broker sent it
  TxnClock::time_point at;
  /// A rule rewrote the broker's answer: what the broker said (0 when it succeeded); unset when
  /// the broker sent error_code itself or kproxy answered in its place.
  std::optional<int16_t> broker_error_code = std::nullopt;
};

/// One transaction, open or ended.
struct TransactionRecord {
  std::string transactional_id;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int transaction_version = 0;  ///< 1 or 2 as the requests show it (AddPartitionsToTxn seen / EndTxn v5+); 0 unknown
  std::string listener, client_id, client_software;
  TxnClock::time_point begin, last_activity, end;
  TxnOutcome outcome = TxnOutcome::kOpen;
  std::set<TopicPartition> partitions;
  std::set<std::string> groups;
  uint64_t records = 0, bytes = 0;
  /// Errors the clients retry: CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
  /// COORDINATOR_NOT_AVAILABLE, and the retriable errors of Produce and AddPartitionsToTxn
  /// (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, ...; is_retried_error())
  uint32_t retries = 0;
  std::vector<TxnError> errors;  ///< in order, at most kMaxErrors (errors_dropped counts the rest)
  uint32_t errors_dropped = 0;
  uint32_t partitions_dropped = 0;
  /// Why it was aborted or fenced: the first error that was not a retry; else a retried error
  /// whose request never succeeded afterwards (the client gave up on it); or none (the client
  /// aborted on its own).
  std::optional<TxnError> cause;
  /// The last retried error whose API has not been answered without error since (a candidate
  /// cause: the client may give up retrying and abort).
  std::optional<TxnError> unresolved_retry;
  /// Transaction.version 1: the broker accepted an AddPartitionsToTxn or AddOffsetsToTxn of it,
  /// so the coordinator has it open (even when a rule told the client otherwise).
  bool known_to_coordinator = false;
  /// Transaction.version 1: the client was sent a success for one of those. Until then a refusal
  /// (as the client was told) ends it: the client can only abort, and does so without EndTxn
  /// (Kafka's TransactionManager sends none for a transaction it never saw start).
  bool client_saw_registration = false;
  /// Fenced by a new producer instance (its InitProducerId for the id): the producer id and epoch
  /// the coordinator gave that one; -1 when not (or when kproxy learned of the fencing only from
  /// an error, without seeing the new instance).
  int64_t fenced_by_producer_id = -1;
  int16_t fenced_by_epoch = -1;
  /// 1 for the first transaction kproxy saw for the id, then 2, 3, ...
  uint64_t sequence = 0;
  /// Ended by an EndTxn: whether the client got the broker's answer to it. False while the answer
  /// was withheld (dropped, or the connection closed in its place) or rewritten into an error by a
  /// fault rule: the coordinator has ended it, the client does not know yet and retries (its
  /// retries are counted in end_retries, not as new transactions). True for outcomes that no
  /// EndTxn answer decides (fenced, timed_out, unknown, a refusal).
  bool end_acknowledged = true;
  /// EndTxn requests sent again for it after the one that ended it at the coordinator.
  uint32_t end_retries = 0;

  static constexpr size_t kMaxErrors = 32;
  static constexpr size_t kMaxPartitions = 4096;
  std::chrono::nanoseconds duration(TxnClock::time_point now) const { return (outcome == TxnOutcome::kOpen ? now : end) - begin; }
};

/// An error a transactional client retries (the request is sent again; the transaction goes on):
/// the coordinator's CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and
/// COORDINATOR_NOT_AVAILABLE, and the retriable errors of Produce and AddPartitionsToTxn (Kafka's
/// RetriableException codes: NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, ...).
bool is_retried_error(int16_t code);

/// Upper bounds of the transaction duration histogram (kproxy_transaction_duration_seconds), in
/// milliseconds: 5 ms to 2 min (a producer's default transaction.timeout.ms is 1 min).
inline constexpr std::array<int64_t, 14> kTxnDurationBoundsMs = {5,    10,   25,   50,    100,   250,   500,
                                                                 1000, 2500, 5000, 10000, 30000, 60000, 120000};

/// How long the transactions of one outcome lasted, from begin to end.
struct TxnDurations {
  /// Per bucket of kTxnDurationBoundsMs (not cumulative: a duration counts in the first bucket
  /// whose bound is >= it), then the overflow (+Inf).
  std::array<uint64_t, kTxnDurationBoundsMs.size() + 1> buckets{};
  std::chrono::nanoseconds sum{0};
  void observe(std::chrono::nanoseconds d);
  uint64_t count() const;
};

/// What happened, for the metrics (monotonic counts) and gauges.
struct TransactionStats {
  std::map<TxnOutcome, uint64_t> ended;          ///< by outcome
  std::map<TxnOutcome, TxnDurations> durations;  ///< of the ended ones, by outcome
  /// (error name, or "client" / "new_producer" when no error, injected) of aborted/fenced ones
  std::map<std::pair<std::string, bool>, uint64_t> abort_causes;
  uint64_t epoch_bumps = 0;  ///< a producer's epoch went up outside EndTxn (KIP-360 bump, or InitProducerId again)
  /// A new producer instance took a transactional.id, or (when kproxy did not see that happen) a
  /// producer learned from an error that it was fenced. Once per fencing: the errors a fenced
  /// producer (a zombie) gets afterwards do not count again.
  uint64_t fencing_events = 0;
  uint64_t untracked = 0;  ///< events of ids that did not fit under max_ids
  size_t open = 0;
  std::chrono::nanoseconds oldest_open_age{0};
};

/// One answered request of a transaction: a child span of its trace (docs/transactions.md
/// "Traces"). Kept only while tracing is on (TransactionTracker::set_trace_hook).
struct TxnRequestSpan {
  TxnApi api = TxnApi::kProduce;
  int16_t api_version = 0;
  TxnClock::time_point sent, answered;
  int16_t error_code = 0;
  std::string injected_by;  ///< the fault rule that injected the error or answered, or ""
  uint64_t connection = 0;
  uint32_t partitions = 0;  ///< AddPartitionsToTxn, Produce, TxnOffsetCommit
  uint64_t records = 0;     ///< Produce
};

/// A transaction that just ended, with its requests (in the order they were answered) and how
/// many of them did not fit under the bound. Called under the tracker's lock: keep it short.
using TraceHook = std::function<void(const TransactionRecord&, std::vector<TxnRequestSpan>&& requests, uint32_t requests_dropped)>;

/// A transaction that just ended (for the duration histogram and the tap).
using EndedHook = std::function<void(const TransactionRecord&)>;

/// One step in a transaction's life, for the tap (`kproxy tap --transactions`).
struct TxnEvent {
  enum class Kind : uint8_t { kBegin, kPartitions, kOffsets, kError, kEnd };
  Kind kind = Kind::kBegin;
  const TransactionRecord& transaction;  ///< as it stands after the step
  uint64_t connection = 0;               ///< where the step was seen
  TxnApi api = TxnApi::kProduce;
  std::vector<TopicPartition> added;  ///< kPartitions: the new ones
  std::string group;                  ///< kOffsets
  const TxnError* error = nullptr;    ///< kError
};
std::string_view txn_event_name(TxnEvent::Kind kind);
using EventHook = std::function<void(const TxnEvent&)>;

class TransactionTracker {
 public:
  struct Limits {
    size_t max_ids = 10000;
    size_t history_per_id = 16;
    /// An open transaction with no activity this long, whose timeout kproxy never saw, ends as
    /// `unknown`.
    std::chrono::seconds silent_after{300};
  };
  TransactionTracker() : TransactionTracker(Limits{}) {}
  /// `topic_names`: names the partitions of topics that requests name by id only (KIP-516); null:
  /// such a partition is recorded under its topic id. `clock`: what the tracker's readers (the
  /// frame observer, the routes, the metrics, the sweeps) take "now" from; it must outlive the
  /// tracker. The tracker itself reads no clock: every call is given its time.
  explicit TransactionTracker(Limits limits, const cluster::TopicNames* topic_names = nullptr,
                              const util::Clock& clock = util::steady_clock())
      : limits_(limits), topic_names_(topic_names), clock_(&clock) {}
  /// The clock named at construction.
  const util::Clock& clock() const { return *clock_; }

  void on_request(uint64_t connection, int32_t correlation_id, const TxnRequest& request, TxnClock::time_point now);
  /// No-op for a (connection, correlation id) without a tracked request.
  void on_response(uint64_t connection, int32_t correlation_id, const TxnResponse& response, TxnClock::time_point now);
  /// Forgets the connection's requests still awaiting a response.
  void on_connection_closed(uint64_t connection);
  /// The answer to `correlation_id`, handed in by on_response as delivered, never reached the
  /// client after all (its connection closed while a delay held it). An EndTxn's: its
  /// transaction's end becomes unacknowledged (TransactionRecord::end_acknowledged); the first
  /// registration the client saw: it did not see it (TransactionRecord::client_saw_registration).
  void on_response_withheld(uint64_t connection, int32_t correlation_id);
  /// True while some tracked request awaits its response (no lock: a response of a transaction
  /// API is looked up only then).
  bool awaiting_responses() const { return pending_count_.load(std::memory_order_relaxed) > 0; }
  /// False while a Produce answer without error tells the tracker nothing: a transactional
  /// Produce is not kept request by request (ConnectionState::produce), so such an answer need
  /// not be handed in, unless tracing is on (each request is a span) or some open transaction
  /// has a Produce retry not yet resolved (a clean answer resolves it). An answer with an error
  /// is always handed in. No lock.
  bool wants_clean_produce_answers() const { return produce_answers_wanted_.load(std::memory_order_relaxed) > 0; }
  /// Ends what has outlived its timeout (timed_out) or gone silent (unknown), and forgets
  /// requests unanswered for `silent_after` (their connection closed). Call now and then (the
  /// metrics and the admin API call it when read).
  void sweep(TxnClock::time_point now);

  TransactionStats stats(TxnClock::time_point now) const;
  /// Open transactions, oldest first.
  std::vector<TransactionRecord> open_transactions() const;
  /// The id's ended transactions (oldest first) and then its open one; empty for an unknown id.
  std::vector<TransactionRecord> history(const std::string& transactional_id) const;
  /// Called (under the tracker's lock: keep it short) for every transaction that ends.
  void set_ended_hook(EndedHook hook);
  /// Called (under the tracker's lock) for every step of every transaction; `wanted` is asked
  /// first (cheaply: is anyone listening?) so that no event is built for nobody.
  void set_event_hook(EventHook hook, std::function<bool()> wanted);
  /// Tracing: from now on each transaction's answered requests are kept (at most
  /// `max_requests`; past it one with an error or an EndTxn takes the place of the latest plain
  /// one) and handed to `hook` when it ends. Without it nothing of this is kept.
  void set_trace_hook(TraceHook hook, size_t max_requests);
  /// The most recent ended transactions across every id, newest first (by when they ended), at
  /// most `max` of them; only those still in their id's bounded history (Limits::history_per_id).
  std::vector<TransactionRecord> recent_ended(size_t max) const;

 private:
  struct IdState {
    int64_t producer_id = -1;
    int16_t producer_epoch = -1;
    int32_t timeout_ms = -1;
    std::optional<TransactionRecord> open;
    std::vector<TxnRequestSpan> spans;  ///< the open transaction's answered requests (tracing only)
    uint32_t spans_dropped = 0;
    std::deque<TransactionRecord> ended;
    TxnClock::time_point last_activity;
    /// Transaction.version 1, after a refusal ended the open transaction (refused before the
    /// coordinator had any of it): the AddPartitionsToTxn requests since then, whose transaction
    /// is not known yet. The Java client either aborts without EndTxn and begins its next
    /// transaction with them, or adds the partitions it still had waiting and ends the refused
    /// one with EndTxn(abort). A record or an offset commit tells the first (they open the next
    /// transaction), an EndTxn(abort) the second (they are folded into the refused one).
    struct AfterRefusal {
      TxnClock::time_point since;
      std::set<TopicPartition> partitions;
      std::vector<TxnError> errors;
    };
    std::optional<AfterRefusal> after_refusal;
    /// The open transaction got a fencing answer (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, ...) to
    /// one of its requests, on this connection. The coordinator ends a transaction with EndTxn,
    /// a new grant of the id or its timeout, never on such an answer: it stays open. It ends
    /// `fenced` when that connection closes first (the client gave up: Java closes the producer);
    /// a later answer without error (the client went on: franz-go, Sarama and the Java 3.x client
    /// abort and go on) clears this.
    std::optional<uint64_t> fencing_answer_on;
    /// Keys (partition_key()) of partitions the open transaction has: a Produce that writes to
    /// them again (most of them) costs a hash look-up, not a name and a set search.
    std::unordered_set<uint64_t> known_partitions;
    /// Keys (partition and base sequence) of the batches whose records the open transaction
    /// counted: a batch sent again on another connection after a lost answer adds none.
    CountedBatches counted_batches;
    /// Counts the transactions opened for the id: a connection that recorded its client in the
    /// open one (ConnectionState::client_generation) need not compare its strings again.
    uint64_t generation = 0;
    /// Mirrors "the open transaction has an unresolved Produce retry" into produce_answers_wanted_.
    bool produce_retry_counted = false;
    /// The last InitProducerId grant (producer_id, producer_epoch) was carried by a request since:
    /// the client got it. A new InitProducerId without a producer id while the grant is unused is
    /// the same instance asking again (its answer was lost or late), not a new instance.
    bool grant_used = true;
    /// A new instance's InitProducerId was answered while an EndTxn of the open transaction was
    /// in flight: the coordinator completed that end first (it answers the new instance
    /// CONCURRENT_TRANSACTIONS until then), so the EndTxn's answer decides how it ended, not the
    /// new instance. It ends fenced only if that answer never comes (the new instance's next
    /// request, the EndTxn's connection closing, or its timeout).
    bool superseded = false;
    /// The last transaction an EndTxn ended (or kproxy ended by time), while the client may still
    /// send an EndTxn for it: its answer was withheld or rewritten, or the transaction timed out
    /// or went silent. An EndTxn of the same producer id and epoch then belongs to it.
    struct LastEnd {
      uint64_t sequence = 0;  ///< TransactionRecord::sequence
      int64_t producer_id = -1;
      int16_t producer_epoch = -1;
      /// kproxy ended it `fenced` when the connection of a fencing answer closed
      /// (fencing_answer_on): the coordinator still had it, and a later EndTxn of the same
      /// producer id and epoch answered without error says how it really ended.
      bool fenced_on_close = false;
    };
    std::optional<LastEnd> awaiting_end;
  };
  /// What survives an id forgotten at max_ids (IdState is gone): its producer id and epoch and
  /// its last end, so that its zombie's requests stay stale and a retried EndTxn stays a retry.
  struct Tombstone {
    int64_t producer_id = -1;
    int16_t producer_epoch = -1;
    int32_t timeout_ms = -1;
    /// The id's last ended transaction, when an EndTxn may still come for it (IdState::awaiting_end).
    std::optional<TransactionRecord> awaiting_end;
    uint64_t generation = 0;
  };
  /// A tracked request awaiting its answer: what the answer is read with. Lean, since every
  /// transactional Produce makes one.
  struct Pending {
    int32_t correlation_id = 0;
    IdState* state = nullptr;  ///< its id's (ids are forgotten only with their pending requests)
    TxnApi api = TxnApi::kProduce;
    int16_t api_version = 0;
    bool commit = false;  ///< EndTxn
    int16_t producer_epoch = -1;
    int64_t producer_id = -1;
    uint32_t partitions = 0;
    uint64_t records = 0;
    TxnClock::time_point sent;
    /// EndTxn only: the request's client, for a commit whose transaction kproxy never saw begin.
    std::unique_ptr<TxnClient> client;
    /// IdState::generation when it was sent: an answer that arrives after its transaction ended
    /// belongs to that one, not to the one open now.
    uint64_t generation = 0;
    /// EndTxn only: the sequence of the transaction it ends, as known when it was sent (the open
    /// one, or the ended one whose end the client has not seen yet); 0 when none. A second EndTxn
    /// sent before the first one's answer came (the client's own request timeout, the first held
    /// on its way) belongs to the transaction the first one ended.
    uint64_t end_of = 0;
  };
  /// One connection's tracked requests awaiting their answers, in the order they were sent (Kafka's
  /// protocol guide: a broker processes and answers the requests of one TCP connection in the
  /// order they arrive), and the id its last request named, so that the
  /// requests of a producer's connection find their IdState without hashing the id again.
  struct ConnectionState {
    util::RingQueue<Pending> pending;
    IdState* last_state = nullptr;  ///< reset when that id is forgotten
    std::string last_id;
    TxnClock::time_point last_seen;
    /// The transactional Produce requests are not queued one by one while tracing is off: the
    /// last one's producer (id state, producer id and epoch, when sent) stands for those in
    /// flight. A producer sends one transactional.id's requests on a connection, and a
    /// transaction's Produce requests are answered before its EndTxn is sent.
    struct LastProduce {
      IdState* state = nullptr;
      int64_t producer_id = -1;
      int16_t producer_epoch = -1;
      TxnClock::time_point sent;
      uint64_t generation = 0;  ///< IdState::generation of the transaction it wrote to
    } produce;
    /// The last answer on this connection that told the client something the tracker acts on (an
    /// EndTxn's, or the first registration the client saw of a transaction): if the pipeline
    /// reports afterwards that it never reached the client (its connection closed while a delay
    /// held it), that is undone (on_response_withheld).
    struct LastAnswer {
      int32_t correlation_id = 0;
      IdState* state = nullptr;
      uint64_t generation = 0;
      TxnApi api = TxnApi::kEndTxn;
    } last_answer;
    uint64_t client_generation = 0;  ///< IdState::generation when this connection last set the open transaction's client
    /// The partitions of this connection's last transactional Produce that the open transaction
    /// (of IdState::generation `partitions_generation`) has: a producer sends to the same
    /// partitions again and again, and comparing them costs less than hashing them.
    struct KnownPartition {
      std::string topic;
      std::array<uint8_t, 16> topic_id{};
      int32_t partition = 0;
      bool operator==(const PartitionRef& p) const { return partition == p.partition && topic == p.topic && topic_id == p.topic_id; }
    };
    std::vector<KnownPartition> last_partitions;
    uint64_t partitions_generation = 0;
  };
  struct IdHash {
    using is_transparent = void;
    size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
  };

  IdState* state_for(std::string_view id, TxnClock::time_point now);
  /// What the answer to `p` tells (on_response, once `p` is found).
  void answer(uint64_t connection, const Pending& p, const TxnResponse& response, TxnClock::time_point now);
  TransactionRecord& open_transaction(IdState& s, const TxnRequest& r, TxnClock::time_point now);
  void end(IdState& s, TxnOutcome outcome, TxnClock::time_point now);
  void note_error(IdState& s, TxnApi api, const TxnResponse& resp, TxnClock::time_point now);
  /// Counts `e` in `t`: a retry, or its cause if it has none; kept in its errors (bounded).
  static void count_error(TransactionRecord& t, TxnError e);
  /// Gives what was seen after a refusal (IdState::AfterRefusal) to `t`: the next transaction,
  /// or the refused one when the client ends that with EndTxn(abort).
  void take_after_refusal(IdState& s, TransactionRecord& t, uint64_t connection, TxnApi api);
  /// Tracing: the answered request `p` as a child span of the open transaction.
  void note_span(IdState& s, uint64_t connection, const Pending& p, const TxnResponse& resp, TxnClock::time_point now);
  /// What a request (of the id's current producer) tells before its answer: the timeout it
  /// announces, the transaction it begins or adds to.
  void track_request(IdState& s, uint64_t connection, const TxnRequest& r, TxnClock::time_point now);
  /// A request of a producer the id no longer has: another producer id, or an older epoch of
  /// this one (a zombie: fenced by a new instance, or left behind by an epoch bump).
  static bool stale(const IdState& s, int64_t producer_id, int16_t producer_epoch);
  /// A zombie's error: kept in the ended transaction of its producer id and epoch (the fenced
  /// one), counted nowhere else.
  void note_stale_error(IdState& s, const Pending& p, const TxnResponse& resp, TxnClock::time_point now);

  /// The ended transaction of `s` that `generation` opened, or nullptr when it is not in the
  /// history (any more).
  static TransactionRecord* ended_of(IdState& s, uint64_t generation);
  /// The ended transaction an EndTxn of `(producer_id, epoch)` belongs to when none is open for
  /// it: the last one, while it awaits its end (IdState::awaiting_end) from that producer.
  static TransactionRecord* awaiting_end_of(IdState& s, int64_t producer_id, int16_t producer_epoch);
  /// Keeps `e` in `t`'s errors (bounded) and its retry count, without making it a cause: an error
  /// of a transaction the coordinator has ended as asked.
  void keep_error(TransactionRecord& t, TxnError e);
  /// An EndTxn sent again for `t` (IdState::awaiting_end), answered with `response`.
  void attach_end_retry(IdState& s, TransactionRecord& t, const Pending& p, const TxnResponse& response, TxnClock::time_point now);
  /// True when some EndTxn of the open transaction awaits its answer.
  bool end_in_flight(const IdState& s);
  /// Ends the open transaction as fenced by a new instance (IdState::superseded).
  void end_superseded(IdState& s, TxnClock::time_point now);
  /// A transaction whose start kproxy did not see, ended by the EndTxn `p` answered without error.
  void record_unseen(IdState& s, uint64_t connection, const Pending& p, const TxnResponse& response, TxnClock::time_point now);

  Limits limits_;
  const cluster::TopicNames* topic_names_;
  const util::Clock* clock_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, IdState, IdHash, std::equal_to<>> ids_;
  /// The ids whose open transaction got a fencing answer on a connection (IdState::fencing_answer_on).
  std::unordered_map<uint64_t, std::vector<std::string>> fencing_answers_;
  /// Ids forgotten at max_ids, at most max(max_ids, kMinTombstones) of them (the oldest goes first).
  static constexpr size_t kMinTombstones = 64;
  std::unordered_map<std::string, Tombstone, IdHash, std::equal_to<>> tombstones_;
  std::deque<std::string> tombstone_order_;
  /// Keeps only the pending requests `keep` says yes to (in order).
  template <class Keep>
  void filter_pending(ConnectionState& c, Keep keep);
  /// The requests awaiting answers, per connection (an entry lives until the connection closes).
  std::unordered_map<uint64_t, ConnectionState> connections_;
  /// Tracing on (1) plus the ids whose open transaction has an unresolved Produce retry.
  std::atomic<uint32_t> produce_answers_wanted_{0};
  /// Keeps IdState::produce_retry_counted and produce_answers_wanted_ in step with `s`.
  void sync_produce_retry(IdState& s);
  /// The common transactional Produce: its id's open transaction already has every partition it
  /// names, and this connection its client. False when the general path must run.
  bool produce_fast_path(IdState& s, uint64_t connection, ConnectionState& c, const TxnRequest& r, TxnClock::time_point now);
  size_t pending_total_ = 0;              ///< over every connection
  std::atomic<size_t> pending_count_{0};  ///< pending_total_, readable without the lock
  TransactionStats stats_;
  EndedHook ended_hook_;
  EventHook event_hook_;
  std::function<bool()> event_wanted_;
  TraceHook trace_hook_;
  size_t max_trace_requests_ = 0;
  bool emitting() const { return event_hook_ && (!event_wanted_ || event_wanted_()); }
  /// Where the request being handled arrived (for events).
  uint64_t current_connection_ = 0;
  TxnApi ending_api_ = TxnApi::kEndTxn;  ///< the API of the request being handled (events)
};

}  // namespace kproxy::observe
