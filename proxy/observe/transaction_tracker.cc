#include "proxy/observe/transaction_tracker.h"

#include <algorithm>

#include "codec/generated/error_code.h"
#include "codec/message_support.h"
#include "proxy/cluster/topic_names.h"

namespace kproxy::observe {

namespace {

using codec::ErrorCode;

bool is(int16_t code, ErrorCode e) { return code == static_cast<int16_t>(e); }

/// Errors that tell a producer it is fenced: another instance took its transactional.id, or the
/// coordinator bumped the epoch (a timeout abort).
bool is_fencing(int16_t code) { return is(code, ErrorCode::kProducerFenced) || is(code, ErrorCode::kInvalidProducerEpoch); }

uint64_t mix(uint64_t x) {  // a 64-bit finaliser (splitmix64's)
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A partition's key in IdState::known_partitions: its topic's name or id and its index, hashed
/// to 64 bits (two partitions of one transaction share a key with a chance of about n^2 / 2^65).
uint64_t partition_key(const PartitionRef& p) {
  uint64_t topic = 0;
  if (p.topic.empty()) {
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; ++i) hi = hi << 8 | p.topic_id[i];
    for (int i = 8; i < 16; ++i) lo = lo << 8 | p.topic_id[i];
    topic = mix(hi ^ mix(lo));
  } else {
    topic = std::hash<std::string_view>{}(p.topic);
  }
  return mix(topic ^ (static_cast<uint64_t>(static_cast<uint32_t>(p.partition)) << 1 | (p.topic.empty() ? 1 : 0)));
}

/// The records of a Produce that its transaction has not counted yet: a batch sent again on
/// another connection (same partition, same base sequence: KIP-98's idempotent retry after its
/// connection was reset, closed or went silent before the answer) was written once by the broker
/// and is counted once. The same batch again on the same connection counts again (a client does
/// not resend there without an answer; a load generator repeating one template does). Without
/// batch details, every record counts.
uint64_t new_records(CountedBatches& counted, const TxnRequest& r, uint64_t connection) {
  uint64_t known = 0, repeated = 0;
  for (const auto& b : r.batches) {
    known += b.records;
    if (b.base_sequence < 0) continue;
    const uint64_t key = mix(partition_key(b.partition) ^ mix(static_cast<uint64_t>(static_cast<uint32_t>(b.base_sequence)) + 1));
    if (const uint64_t* sent_on = counted.find(key)) {
      if (*sent_on != connection) repeated += b.records;
    } else {
      counted.add(key, connection);  // refused past CountedBatches::kMaxBatches: nothing deduplicated then
    }
  }
  return known > r.records ? r.records : r.records - repeated;
}

/// The partition as a transaction records it: a topic named by id (KIP-516) by the name kproxy
/// learnt from a Metadata response, else by the id as Kafka prints it.
TopicPartition owned(const PartitionRef& p, const cluster::TopicNames* names) {
  if (!p.topic.empty()) return {std::string(p.topic), p.partition};
  if (auto name = names ? names->name(p.topic_id) : std::nullopt) return {std::move(*name), p.partition};
  return {codec::json_uuid(p.topic_id), p.partition};
}

}  // namespace

namespace {
/// The request that opens a transaction kproxy saw only an answer of: the API and producer of the
/// request answered, and `client`'s names (views into `client`, which must outlive the result).
TxnRequest request_as_seen(TxnApi api, int64_t producer_id, int16_t producer_epoch, const TxnClient* client) {
  TxnRequest r;
  r.api = api;
  r.producer_id = producer_id;
  r.producer_epoch = producer_epoch;
  if (client) {
    r.transactional_id = client->transactional_id;
    r.listener = client->listener;
    r.client_id = client->client_id;
    r.client_software = client->client_software;
  }
  return r;
}
}  // namespace

bool is_retried_error(int16_t code) {
  switch (static_cast<ErrorCode>(code)) {
    // The coordinator's (Kafka's TransactionManager retries them).
    case ErrorCode::kConcurrentTransactions:
    case ErrorCode::kNotCoordinator:
    case ErrorCode::kCoordinatorLoadInProgress:
    case ErrorCode::kCoordinatorNotAvailable:
    // A partition's (the Sender retries a batch until its delivery timeout; AddPartitionsToTxn
    // is retried on UNKNOWN_TOPIC_OR_PARTITION).
    case ErrorCode::kCorruptMessage:
    case ErrorCode::kUnknownTopicOrPartition:
    case ErrorCode::kLeaderNotAvailable:
    case ErrorCode::kNotLeaderOrFollower:
    case ErrorCode::kRequestTimedOut:
    case ErrorCode::kNetworkException:
    case ErrorCode::kNotEnoughReplicas:
    case ErrorCode::kNotEnoughReplicasAfterAppend:
    case ErrorCode::kKafkaStorageError:
    case ErrorCode::kFencedLeaderEpoch:
    case ErrorCode::kUnknownLeaderEpoch: return true;
    default: return false;
  }
}

std::string_view txn_api_name(TxnApi api) {
  switch (api) {
    case TxnApi::kInitProducerId: return "InitProducerId";
    case TxnApi::kAddPartitionsToTxn: return "AddPartitionsToTxn";
    case TxnApi::kAddOffsetsToTxn: return "AddOffsetsToTxn";
    case TxnApi::kTxnOffsetCommit: return "TxnOffsetCommit";
    case TxnApi::kProduce: return "Produce";
    case TxnApi::kEndTxn: return "EndTxn";
  }
  return "unknown";
}

std::string_view txn_outcome_name(TxnOutcome outcome) {
  switch (outcome) {
    case TxnOutcome::kOpen: return "open";
    case TxnOutcome::kCommitted: return "committed";
    case TxnOutcome::kAborted: return "aborted";
    case TxnOutcome::kFenced: return "fenced";
    case TxnOutcome::kTimedOut: return "timed_out";
    case TxnOutcome::kUnknown: return "unknown";
  }
  return "unknown";
}

std::string_view txn_event_name(TxnEvent::Kind kind) {
  switch (kind) {
    case TxnEvent::Kind::kBegin: return "begin";
    case TxnEvent::Kind::kPartitions: return "partitions_added";
    case TxnEvent::Kind::kOffsets: return "offsets_added";
    case TxnEvent::Kind::kError: return "error";
    case TxnEvent::Kind::kEnd: return "end";
  }
  return "unknown";
}

void TxnDurations::observe(std::chrono::nanoseconds d) {
  size_t b = 0;
  while (b < kTxnDurationBoundsMs.size() && d > std::chrono::milliseconds(kTxnDurationBoundsMs[b])) ++b;
  ++buckets[b];
  sum += d;
}

uint64_t TxnDurations::count() const {
  uint64_t n = 0;
  for (uint64_t b : buckets) n += b;
  return n;
}

void TransactionTracker::set_event_hook(EventHook hook, std::function<bool()> wanted) {
  std::lock_guard lock(mutex_);
  event_hook_ = std::move(hook);
  event_wanted_ = std::move(wanted);
}

void TransactionTracker::set_trace_hook(TraceHook hook, size_t max_requests) {
  std::lock_guard lock(mutex_);
  bool was = max_trace_requests_ > 0;
  trace_hook_ = std::move(hook);
  max_trace_requests_ = trace_hook_ ? max_requests : 0;
  bool is = max_trace_requests_ > 0;
  if (is && !was) ++produce_answers_wanted_;
  if (was && !is) --produce_answers_wanted_;
}

void TransactionTracker::sync_produce_retry(IdState& s) {
  bool want = s.open && s.open->unresolved_retry && s.open->unresolved_retry->api == TxnApi::kProduce;
  if (want == s.produce_retry_counted) return;
  s.produce_retry_counted = want;
  if (want) ++produce_answers_wanted_;
  else --produce_answers_wanted_;
}

bool TransactionTracker::produce_fast_path(IdState& s, uint64_t connection, ConnectionState& c, const TxnRequest& r,
                                           TxnClock::time_point now) {
  // A Produce kproxy answered itself goes the slow way (track_request): the broker has none of it.
  if (!r.reached_broker || !s.open || s.after_refusal || c.client_generation != s.generation) return false;
  const bool as_last = c.partitions_generation == s.generation &&
                       std::equal(c.last_partitions.begin(), c.last_partitions.end(), r.partitions.begin(), r.partitions.end());
  if (!as_last) {
    for (const auto& ref : r.partitions)
      if (!s.known_partitions.contains(partition_key(ref))) return false;
    c.last_partitions.clear();
    for (const auto& ref : r.partitions) c.last_partitions.push_back({std::string(ref.topic), ref.topic_id, ref.partition});
    c.partitions_generation = s.generation;
  }
  TransactionRecord& t = *s.open;
  t.last_activity = now;
  t.records += new_records(s.counted_batches, r, connection);
  t.bytes += r.bytes;
  return true;
}

void TransactionTracker::set_ended_hook(EndedHook hook) {
  std::lock_guard lock(mutex_);
  ended_hook_ = std::move(hook);
}

TransactionTracker::IdState* TransactionTracker::state_for(std::string_view id, TxnClock::time_point now) {
  auto it = ids_.find(id);
  if (it != ids_.end()) return &it->second;
  if (ids_.size() >= limits_.max_ids) {
    // Make room: forget the id idle longest that has no open transaction.
    auto victim = ids_.end();
    for (auto i = ids_.begin(); i != ids_.end(); ++i) {
      if (i->second.open) continue;
      if (victim == ids_.end() || i->second.last_activity < victim->second.last_activity) victim = i;
    }
    if (victim == ids_.end()) {
      ++stats_.untracked;
      return nullptr;
    }
    // Its producer and an end the client may still retry survive it (Tombstone).
    Tombstone tomb{victim->second.producer_id, victim->second.producer_epoch, victim->second.timeout_ms, std::nullopt,
                   victim->second.generation};
    if (victim->second.awaiting_end && !victim->second.ended.empty() &&
        victim->second.ended.back().sequence == victim->second.awaiting_end->sequence)
      tomb.awaiting_end = std::move(victim->second.ended.back());
    if (tombstones_.size() >= std::max<size_t>(limits_.max_ids, kMinTombstones) && !tombstone_order_.empty()) {
      tombstones_.erase(tombstone_order_.front());
      tombstone_order_.pop_front();
    }
    if (tombstones_.insert_or_assign(victim->first, std::move(tomb)).second) tombstone_order_.push_back(victim->first);
    // Its requests still awaiting answers go with it (Pending::state points into ids_).
    const IdState* gone = &victim->second;
    for (auto& [connection, c] : connections_) {
      filter_pending(c, [gone](const Pending& p) { return p.state != gone; });
      if (c.last_state == gone) {
        c.last_state = nullptr;
        c.last_id.clear();
        c.client_generation = 0;
      }
      if (c.produce.state == gone) c.produce = {};
      if (c.last_answer.state == gone) c.last_answer = {};
    }
    ids_.erase(victim);
  }
  IdState& s = ids_.try_emplace(std::string(id)).first->second;
  s.last_activity = now;
  if (auto tomb = tombstones_.find(id); tomb != tombstones_.end()) {
    // Forgotten at max_ids before: what it knew of its producer comes back.
    Tombstone& t = tomb->second;
    s.producer_id = t.producer_id;
    s.producer_epoch = t.producer_epoch;
    s.timeout_ms = t.timeout_ms;
    s.generation = t.generation;
    if (t.awaiting_end) {
      s.awaiting_end = IdState::LastEnd{t.awaiting_end->sequence, t.awaiting_end->producer_id, t.awaiting_end->producer_epoch};
      s.ended.push_back(std::move(*t.awaiting_end));
    }
    tombstones_.erase(tomb);
    std::erase(tombstone_order_, std::string(id));
  }
  return &s;
}

TransactionRecord& TransactionTracker::open_transaction(IdState& s, const TxnRequest& r, TxnClock::time_point now) {
  if (s.open && s.superseded) end_superseded(s, now);  // the new instance goes on: the old one's EndTxn never answered
  if (!s.open) {
    TransactionRecord t;
    t.transactional_id.assign(r.transactional_id);
    t.producer_id = r.producer_id >= 0 ? r.producer_id : s.producer_id;
    t.producer_epoch = r.producer_epoch >= 0 ? r.producer_epoch : s.producer_epoch;
    t.begin = now;
    t.sequence = ++s.generation;
    s.open = std::move(t);
    s.awaiting_end.reset();  // a new transaction: the client is done with the last one
    s.known_partitions.clear();
    s.counted_batches.clear();
    s.spans.clear();
    s.spans_dropped = 0;
    if (emitting()) event_hook_(TxnEvent{TxnEvent::Kind::kBegin, *s.open, current_connection_, r.api, {}, {}, nullptr});
  }
  TransactionRecord& t = *s.open;
  t.last_activity = now;
  // Compared before assigned: the same client sends most of a transaction's requests.
  if (!r.listener.empty() && t.listener != r.listener) t.listener.assign(r.listener);
  if (!r.client_id.empty() && t.client_id != r.client_id) t.client_id.assign(r.client_id);
  if (!r.client_software.empty() && t.client_software != r.client_software) t.client_software.assign(r.client_software);
  return t;
}

void TransactionTracker::end(IdState& s, TxnOutcome outcome, TxnClock::time_point now) {
  if (!s.open) return;
  s.superseded = false;
  s.fencing_answer_on.reset();
  TransactionRecord& t = *s.open;
  t.outcome = outcome;
  t.end = now;
  ++stats_.ended[outcome];
  stats_.durations[outcome].observe(t.duration(now));
  if (outcome == TxnOutcome::kAborted && !t.cause && t.unresolved_retry) t.cause = t.unresolved_retry;  // it gave up retrying
  if (outcome == TxnOutcome::kAborted || outcome == TxnOutcome::kFenced) {
    // Without an error: the application aborted, or (fenced) a new producer instance took the id.
    std::string cause = t.cause ? codec::error_name(t.cause->error_code) : outcome == TxnOutcome::kFenced ? "new_producer" : "client";
    ++stats_.abort_causes[{cause, t.cause && !t.cause->injected_by.empty()}];
  }
  if (ended_hook_) ended_hook_(t);
  if (trace_hook_) trace_hook_(t, std::move(s.spans), s.spans_dropped);
  s.spans.clear();
  s.spans_dropped = 0;
  if (emitting()) event_hook_(TxnEvent{TxnEvent::Kind::kEnd, t, current_connection_, ending_api_, {}, {}, nullptr});
  s.ended.push_back(std::move(t));
  s.open.reset();
  while (s.ended.size() > limits_.history_per_id) s.ended.pop_front();
}

void TransactionTracker::count_error(TransactionRecord& t, TxnError e) {
  if (is_retried_error(e.error_code)) {
    ++t.retries;
    t.unresolved_retry = e;
  } else if (!t.cause) {
    t.cause = e;
  }
  if (t.errors.size() < TransactionRecord::kMaxErrors) t.errors.push_back(std::move(e));
  else ++t.errors_dropped;
}

void TransactionTracker::note_error(IdState& s, TxnApi api, const TxnResponse& resp, TxnClock::time_point now) {
  TxnError e{api, resp.error_code, resp.injected_by, now, resp.broker_error_code};
  if (!s.open) {
    // After a refusal: kept until it is known whose it is.
    if (s.after_refusal) {
      if (s.after_refusal->errors.size() < TransactionRecord::kMaxErrors) s.after_refusal->errors.push_back(std::move(e));
    } else if (!s.ended.empty() && s.ended.back().sequence == s.generation) {
      // Late: the answer of a request of the transaction that has just ended.
      TransactionRecord& t = s.ended.back();
      if (t.errors.size() < TransactionRecord::kMaxErrors) t.errors.push_back(std::move(e));
      else ++t.errors_dropped;
    }
    return;
  }
  TransactionRecord& t = *s.open;
  if (emitting()) event_hook_(TxnEvent{TxnEvent::Kind::kError, t, current_connection_, api, {}, {}, &e});
  count_error(t, std::move(e));
}

void TransactionTracker::take_after_refusal(IdState& s, TransactionRecord& t, uint64_t connection, TxnApi api) {
  if (!s.after_refusal) return;
  IdState::AfterRefusal a = std::move(*s.after_refusal);
  s.after_refusal.reset();
  if (!a.partitions.empty()) t.transaction_version = 1;  // they came in AddPartitionsToTxn
  std::vector<TopicPartition> added;
  for (const auto& p : a.partitions) {
    if (t.partitions.count(p)) continue;
    if (t.partitions.size() >= TransactionRecord::kMaxPartitions) {
      ++t.partitions_dropped;
      continue;
    }
    t.partitions.insert(p);
    added.push_back(p);
  }
  // Their retried errors are no candidate cause: the client went on (to a record, an offset
  // commit or its EndTxn), so the request went through.
  std::optional<TxnError> unresolved = t.unresolved_retry;
  for (auto& e : a.errors) count_error(t, std::move(e));
  t.unresolved_retry = std::move(unresolved);
  if (t.outcome != TxnOutcome::kOpen) return;  // folded into the ended one: its events are out
  t.begin = std::min(t.begin, a.since);
  if (!added.empty() && emitting()) event_hook_(TxnEvent{TxnEvent::Kind::kPartitions, t, connection, api, std::move(added), {}, nullptr});
}

void TransactionTracker::note_span(IdState& s, uint64_t connection, const Pending& p, const TxnResponse& resp, TxnClock::time_point now) {
  if (max_trace_requests_ == 0 || !s.open) return;
  TxnRequestSpan span{p.api, p.api_version, p.sent, now, resp.error_code, resp.injected_by, connection, p.partitions, p.records};
  if (s.spans.size() < max_trace_requests_) {
    s.spans.push_back(std::move(span));
    return;
  }
  ++s.spans_dropped;
  // Full: an error or an EndTxn (what a trace is read for) takes the place of the latest request
  // that has neither; anything else is only counted.
  if (span.error_code == 0 && span.api != TxnApi::kEndTxn) return;
  for (auto it = s.spans.rbegin(); it != s.spans.rend(); ++it) {
    if (it->error_code != 0 || it->api == TxnApi::kEndTxn) continue;
    s.spans.erase(std::next(it).base());
    s.spans.push_back(std::move(span));
    return;
  }
}

bool TransactionTracker::stale(const IdState& s, int64_t producer_id, int16_t producer_epoch) {
  if (producer_id < 0 || s.producer_id < 0) return false;
  if (producer_id != s.producer_id) return true;
  return producer_epoch >= 0 && s.producer_epoch >= 0 && producer_epoch < s.producer_epoch;
}

void TransactionTracker::note_stale_error(IdState& s, const Pending& p, const TxnResponse& resp, TxnClock::time_point now) {
  if (resp.error_code == 0) return;
  for (auto t = s.ended.rbegin(); t != s.ended.rend(); ++t) {
    if (t->producer_id != p.producer_id || t->producer_epoch != p.producer_epoch) continue;
    if (t->outcome != TxnOutcome::kFenced && t->outcome != TxnOutcome::kTimedOut) return;
    TxnError e{p.api, resp.error_code, resp.injected_by, now};
    if (emitting()) event_hook_(TxnEvent{TxnEvent::Kind::kError, *t, current_connection_, p.api, {}, {}, &e});
    if (t->errors.size() < TransactionRecord::kMaxErrors) t->errors.push_back(std::move(e));
    else ++t->errors_dropped;
    return;
  }
}

void TransactionTracker::on_request(uint64_t connection, int32_t correlation_id, const TxnRequest& request, TxnClock::time_point now) {
  if (request.transactional_id.empty()) return;
  std::lock_guard lock(mutex_);
  current_connection_ = connection;
  ending_api_ = request.api;
  ConnectionState& c = connections_[connection];
  c.last_seen = now;
  IdState* s = c.last_state && c.last_id == request.transactional_id ? c.last_state : state_for(request.transactional_id, now);
  if (!s) return;
  if (c.last_state != s) {
    c.last_state = s;
    c.last_id.assign(request.transactional_id);
    c.client_generation = 0;
  }
  s->last_activity = now;
  if (request.api != TxnApi::kInitProducerId && request.producer_id >= 0 && request.producer_id == s->producer_id &&
      request.producer_epoch == s->producer_epoch)
    s->grant_used = true;  // the client has its InitProducerId answer
  // A zombie's request is not part of the id's transaction: only its answer is kept (the error
  // that tells it it was fenced goes into its own, ended, transaction).
  bool zombie = request.api != TxnApi::kInitProducerId && stale(*s, request.producer_id, request.producer_epoch);
  const bool produce = request.api == TxnApi::kProduce;
  if (!zombie && !(produce && produce_fast_path(*s, connection, c, request, now))) {
    track_request(*s, connection, request, now);
    if (produce && s->open) c.client_generation = s->generation;  // open_transaction() took this request's client
    sync_produce_retry(*s);
  }
  if (produce && max_trace_requests_ == 0) {  // not queued (ConnectionState::produce)
    c.produce = {s, request.producer_id, request.producer_epoch, now, s->generation};
    return;
  }
  Pending p{correlation_id,
            s,
            request.api,
            request.api_version,
            request.commit,
            request.producer_epoch,
            request.producer_id,
            static_cast<uint32_t>(request.partitions.size()),
            request.records,
            now,
            nullptr,
            s->generation};
  if (request.api == TxnApi::kEndTxn) {
    if (s->open) p.end_of = s->open->sequence;
    else if (s->awaiting_end && s->awaiting_end->producer_id == request.producer_id &&
             s->awaiting_end->producer_epoch == request.producer_epoch)
      p.end_of = s->awaiting_end->sequence;
    p.client = std::make_unique<TxnClient>(TxnClient{std::string(request.transactional_id), std::string(request.listener),
                                                     std::string(request.client_id), std::string(request.client_software)});
  }
  c.pending.push_back(std::move(p));
  pending_count_.store(++pending_total_, std::memory_order_relaxed);
}

template <class Keep>
void TransactionTracker::filter_pending(ConnectionState& c, Keep keep) {
  for (size_t n = c.pending.size(); n > 0; --n) {
    Pending p = std::move(c.pending.front());
    c.pending.pop_front();
    if (keep(p)) c.pending.push_back(std::move(p));
    else --pending_total_;
  }
  c.pending.release_if_empty();
  pending_count_.store(pending_total_, std::memory_order_relaxed);
}

void TransactionTracker::track_request(IdState& s, uint64_t connection, const TxnRequest& request, TxnClock::time_point now) {
  switch (request.api) {
    case TxnApi::kInitProducerId:
      if (request.transaction_timeout_ms > 0) s.timeout_ms = request.transaction_timeout_ms;
      s.after_refusal.reset();
      break;
    case TxnApi::kAddPartitionsToTxn:
    case TxnApi::kProduce:
    case TxnApi::kTxnOffsetCommit: {
      if (!request.reached_broker) {
        // Answered by kproxy: the client has begun a transaction, the coordinator has nothing of
        // this request (no partition, record or offset). Kept as after a refusal when that is
        // where the id stands.
        if (!(request.api == TxnApi::kAddPartitionsToTxn && !s.open && s.after_refusal)) {
          TransactionRecord& t = open_transaction(s, request, now);
          take_after_refusal(s, t, connection, request.api);
          if (request.api == TxnApi::kAddPartitionsToTxn) t.transaction_version = 1;  // only transaction.version 1 clients send it
        }
        break;
      }
      if (request.api == TxnApi::kAddPartitionsToTxn && !s.open && s.after_refusal) {
        // Whose it is shows later (IdState::AfterRefusal).
        for (const auto& p : request.partitions)
          if (s.after_refusal->partitions.size() < TransactionRecord::kMaxPartitions)
            s.after_refusal->partitions.insert(owned(p, topic_names_));
        break;
      }
      TransactionRecord& t = open_transaction(s, request, now);
      take_after_refusal(s, t, connection, request.api);
      if (request.api == TxnApi::kAddPartitionsToTxn) t.transaction_version = 1;
      std::vector<TopicPartition> added;
      if (request.api != TxnApi::kTxnOffsetCommit) {
        for (const auto& ref : request.partitions) {
          uint64_t key = partition_key(ref);
          if (s.known_partitions.contains(key)) continue;
          TopicPartition p = owned(ref, topic_names_);
          if (t.partitions.count(p)) {
            s.known_partitions.insert(key);
          } else if (t.partitions.size() < TransactionRecord::kMaxPartitions) {
            s.known_partitions.insert(key);
            t.partitions.insert(p);
            added.push_back(std::move(p));
          } else {
            ++t.partitions_dropped;
          }
        }
      }
      if (!added.empty() && emitting())
        event_hook_(TxnEvent{TxnEvent::Kind::kPartitions, t, connection, request.api, std::move(added), {}, nullptr});
      if (!request.group_id.empty() && t.groups.emplace(request.group_id).second && emitting())
        event_hook_(TxnEvent{TxnEvent::Kind::kOffsets, t, connection, request.api, {}, std::string(request.group_id), nullptr});
      t.records += new_records(s.counted_batches, request, connection);
      t.bytes += request.bytes;
      break;
    }
    case TxnApi::kAddOffsetsToTxn: {
      TransactionRecord& t = open_transaction(s, request, now);
      take_after_refusal(s, t, connection, request.api);
      if (request.reached_broker && t.groups.emplace(request.group_id).second && emitting())
        event_hook_(TxnEvent{TxnEvent::Kind::kOffsets, t, connection, request.api, {}, std::string(request.group_id), nullptr});
      break;
    }
    case TxnApi::kEndTxn:
      if (s.open && request.api_version >= 5) s.open->transaction_version = 2;
      break;
  }
}

void TransactionTracker::on_response(uint64_t connection, int32_t correlation_id, const TxnResponse& response, TxnClock::time_point now) {
  std::lock_guard lock(mutex_);
  auto cit = connections_.find(connection);
  if (cit == connections_.end()) return;
  ConnectionState& c = cit->second;
  util::RingQueue<Pending>& queue = c.pending;
  size_t at = 0;
  while (at < queue.size() && queue[at].correlation_id != correlation_id) ++at;
  Pending p;
  if (at < queue.size() && !response.from_broker) {
    // kproxy's own answer, handed in when the request passed: the requests before it are still
    // at the broker, their answers to come.
    p = std::move(queue[at]);
    filter_pending(c, [correlation_id](const Pending& q) { return q.correlation_id != correlation_id; });
  } else if (at < queue.size()) {
    // The broker answers the requests of a connection in order (ConnectionState) and every answer
    // is observed, delivered or not: a request before this one still here had an answer the
    // tracker was not handed (it told nothing): forgotten.
    for (; at > 0; --at, --pending_total_) queue.pop_front();
    p = std::move(queue.front());
    queue.pop_front();
    pending_count_.store(--pending_total_, std::memory_order_relaxed);
  } else if (response.api == TxnApi::kProduce && c.produce.state) {
    // A transactional Produce's answer: its request stands in ConnectionState::produce.
    p.correlation_id = correlation_id;
    p.state = c.produce.state;
    p.producer_id = c.produce.producer_id;
    p.producer_epoch = c.produce.producer_epoch;
    p.sent = c.produce.sent;
    p.generation = c.produce.generation;
  } else {
    return;  // not a tracked request's answer
  }
  current_connection_ = connection;
  ending_api_ = p.api;
  const bool saw_registration = p.state->open && p.state->open->client_saw_registration;
  answer(connection, p, response, now);
  sync_produce_retry(*p.state);
  const bool registered_now = !saw_registration && p.state->open && p.state->open->client_saw_registration;
  if ((p.api == TxnApi::kEndTxn && response.delivered) || registered_now)
    c.last_answer = {correlation_id, p.state, p.state->open && registered_now ? p.state->open->sequence : p.generation, p.api};
}

void TransactionTracker::on_response_withheld(uint64_t connection, int32_t correlation_id) {
  std::lock_guard lock(mutex_);
  auto cit = connections_.find(connection);
  if (cit == connections_.end()) return;
  ConnectionState::LastAnswer& a = cit->second.last_answer;
  if (!a.state || a.correlation_id != correlation_id) return;
  IdState& s = *a.state;
  const uint64_t generation = a.generation;
  const TxnApi api = a.api;
  a = {};
  if (api != TxnApi::kEndTxn) {
    // The success the client never got: it has not seen the transaction start after all.
    if (s.open && s.open->sequence == generation) s.open->client_saw_registration = false;
    return;
  }
  TransactionRecord* t = ended_of(s, generation);
  if (!t || !t->end_acknowledged || s.ended.back().sequence != t->sequence || s.open) return;
  if (t->outcome != TxnOutcome::kCommitted && t->outcome != TxnOutcome::kAborted) return;
  t->end_acknowledged = false;
  s.awaiting_end = IdState::LastEnd{t->sequence, t->producer_id, t->producer_epoch};
}

void TransactionTracker::answer(uint64_t connection, const Pending& p, const TxnResponse& response, TxnClock::time_point now) {
  const Pending& r = p;
  IdState& s = *p.state;
  s.last_activity = now;
  // What the coordinator (or a partition leader) did: its own answer, whatever a rule made of it
  // for the client; -1 when kproxy answered in its place (the broker saw nothing).
  const int16_t broker = response.broker_code();

  if (r.api == TxnApi::kEndTxn) {
    // An EndTxn of the transaction that a new instance superseded while it was in flight: its
    // answer says how that transaction ended (IdState::superseded).
    if (s.open && s.superseded && s.open->sequence == r.generation) {
      note_span(s, connection, p, response, now);
      if (response.error_code != 0) note_error(s, r.api, response, now);
      if (broker == 0) {
        s.open->end_acknowledged = response.delivered && response.error_code == 0;
        s.superseded = false;
        end(s, r.commit ? TxnOutcome::kCommitted : TxnOutcome::kAborted, now);
      } else if (broker > 0 && !is_retried_error(broker)) {
        end_superseded(s, now);
      }
      return;
    }
    // Transaction.version 1: EndTxn names no transaction, only the producer id and epoch, and the
    // coordinator ends whatever that producer has ongoing when the request arrives. One sent for
    // an earlier transaction and held on its way (while the client sent it again elsewhere and
    // went on) ends the transaction open now, if the coordinator has it (partitions or offsets
    // added): the next transaction is committed or aborted as the late request asked, before the
    // client asks anything (KIP-890 closes this with an epoch per transaction). Seen with franz-go
    // in conformance scenario 40.
    if (r.end_of != 0 && broker == 0 && s.open && s.open->sequence != r.end_of && s.open->sequence != r.generation &&
        s.open->transaction_version == 1 && s.open->producer_id == r.producer_id && s.open->producer_epoch == r.producer_epoch &&
        (!s.open->partitions.empty() || !s.open->groups.empty())) {
      note_span(s, connection, p, response, now);
      TransactionRecord& t = *s.open;
      t.end_acknowledged = false;  // the client did not ask: its own EndTxn comes later, and is refused
      s.awaiting_end = IdState::LastEnd{t.sequence, r.producer_id, r.producer_epoch};
      end(s, r.commit ? TxnOutcome::kCommitted : TxnOutcome::kAborted, now);
      return;
    }
    // Sent again for a transaction the coordinator has ended already (its answer was lost, or the
    // client gave up on it): part of that one, not a new one.
    if (!(s.open && s.open->sequence == r.generation)) {
      if (TransactionRecord* t = awaiting_end_of(s, r.producer_id, r.producer_epoch)) {
        attach_end_retry(s, *t, p, response, now);
        return;
      }
      // Answered after another EndTxn of its transaction ended it: the client sent EndTxn again
      // before the first answer came (its own request timeout, or the first one held on its way).
      // The coordinator answers a repeated end of a completed transaction alike
      // (TransactionCoordinator.handleEndTransaction): one transaction.
      if (r.end_of != 0) {
        TransactionRecord* t = ended_of(s, r.end_of);
        if (t && t->producer_id == r.producer_id && t->producer_epoch == r.producer_epoch) {  // not a zombie's
          attach_end_retry(s, *t, p, response, now);
          return;
        }
      }
    }
  }
  // Stale now even if it was not when sent: a new instance took the id while it was in flight.
  if (r.api != TxnApi::kInitProducerId && stale(s, r.producer_id, r.producer_epoch)) {
    note_stale_error(s, p, response, now);
    return;
  }
  // The answer of a request whose transaction has ended since, another one open now: it tells
  // about the ended one only.
  if (r.api != TxnApi::kInitProducerId && r.api != TxnApi::kEndTxn && r.generation != 0 && r.generation != s.generation) {
    if (response.error_code == 0) return;
    if (TransactionRecord* t = ended_of(s, r.generation)) {
      TxnError e{r.api, response.error_code, response.injected_by, now, response.broker_error_code};
      if (t->errors.size() < TransactionRecord::kMaxErrors) t->errors.push_back(std::move(e));
      else ++t->errors_dropped;
    }
    return;
  }
  if (s.open) {
    s.open->last_activity = now;
    // The request that got a retried error went through at last.
    if (response.error_code == 0 && s.open->unresolved_retry && s.open->unresolved_retry->api == r.api) s.open->unresolved_retry.reset();
    if (response.error_code == 0 && broker == 0) s.fencing_answer_on.reset();  // the client went on after a fencing answer
  }

  switch (r.api) {
    case TxnApi::kInitProducerId: {
      // The coordinator's grant counts, delivered or not: it has bumped the epoch and aborted
      // what the id had open, whatever the client was told.
      if (broker != 0) return;
      // The same grant again: the coordinator's answer to a retry of the request that got it
      // (KIP-360: an InitProducerId with the producer's own id and epoch is answered alike twice).
      if (response.producer_id == s.producer_id && response.producer_epoch == s.producer_epoch) return;
      // One that ends the open transaction (a new instance, or a bump) is part of its trace.
      note_span(s, connection, p, response, now);
      // A producer that starts with this id (no producer id in its request) fences the one before
      // it (KIP-98); one that sends its own id and epoch bumps its epoch (KIP-360). Either way the
      // coordinator aborts what the id had open. A start while the last grant was never used is
      // the same instance asking again (the answer to its first request was lost or late).
      bool had = s.producer_id >= 0;
      bool asked_again = had && r.producer_id < 0 && !s.grant_used;
      bool new_instance = had && r.producer_id < 0 && !asked_again;
      if (new_instance) ++stats_.fencing_events;
      else if (had && !asked_again) ++stats_.epoch_bumps;
      if (s.open && new_instance) {
        s.open->fenced_by_producer_id = response.producer_id;
        s.open->fenced_by_epoch = response.producer_epoch;
      }
      if (s.open && new_instance && end_in_flight(s)) s.superseded = true;  // its EndTxn's answer decides
      else if (s.open) end(s, new_instance ? TxnOutcome::kFenced : TxnOutcome::kAborted, now);
      s.producer_id = response.producer_id;
      s.producer_epoch = response.producer_epoch;
      s.grant_used = false;
      s.awaiting_end.reset();  // a new producer epoch: no EndTxn of the old one can come
      return;
    }
    case TxnApi::kEndTxn:
      if (!s.open && s.after_refusal && !r.commit && !is_retried_error(response.error_code) && !is_fencing(response.error_code)) {
        // The refused transaction's own EndTxn(abort), answered (IdState::AfterRefusal): what
        // came since is that one's; it was counted when it was refused.
        if (response.error_code != 0) note_error(s, r.api, response, now);
        if (!s.ended.empty() && s.ended.back().outcome == TxnOutcome::kAborted) take_after_refusal(s, s.ended.back(), connection, r.api);
        s.after_refusal.reset();
        return;
      }
      if (broker == 0) {
        // The coordinator ended it (delivered or not: the client learns it when it retries).
        if (!s.open) {
          // A transaction whose start kproxy did not see (it began before kproxy started, or on a
          // path kproxy does not observe): recorded so that the counts stay whole.
          open_transaction(s, request_as_seen(r.api, r.producer_id, r.producer_epoch, p.client.get()), p.sent);
          take_after_refusal(s, *s.open, connection, r.api);
        }
        note_span(s, connection, p, response, now);
        TransactionRecord& t = *s.open;
        // A rule rewrote the coordinator's success: kept with it, no cause (it ended as asked).
        if (response.error_code != 0)
          keep_error(t, TxnError{r.api, response.error_code, response.injected_by, now, response.broker_error_code});
        t.end_acknowledged = response.delivered && response.error_code == 0;
        if (!t.end_acknowledged) s.awaiting_end = IdState::LastEnd{t.sequence, r.producer_id, r.producer_epoch};
        if (t.unresolved_retry && t.unresolved_retry->api == TxnApi::kEndTxn) t.unresolved_retry.reset();
        end(s, r.commit ? TxnOutcome::kCommitted : TxnOutcome::kAborted, now);
        // Transaction.version 2: a new epoch per transaction (KIP-890), given to the id's producer.
        if (response.producer_epoch >= 0 && (s.producer_id < 0 || r.producer_id == s.producer_id)) {
          s.producer_id = response.producer_id;
          s.producer_epoch = response.producer_epoch;
        }
        return;
      }
      note_span(s, connection, p, response, now);
      note_error(s, r.api, response, now);
      if (is_fencing(response.error_code)) {
        ++stats_.fencing_events;
        bool timed_out = s.open && s.timeout_ms > 0 && now - s.open->begin >= std::chrono::milliseconds(s.timeout_ms);
        end(s, timed_out ? TxnOutcome::kTimedOut : TxnOutcome::kFenced, now);
      }
      return;
    default: {
      note_span(s, connection, p, response, now);
      // Transaction.version 1: AddPartitionsToTxn v0-3 (the client's, all or nothing) and
      // AddOffsetsToTxn put the transaction at the coordinator: when the broker accepted it,
      // whatever a rule told the client.
      bool registers = (r.api == TxnApi::kAddPartitionsToTxn && r.api_version <= 3) || r.api == TxnApi::kAddOffsetsToTxn;
      if (broker == 0 && registers && s.open) s.open->known_to_coordinator = true;
      if (response.error_code == 0 && response.delivered && registers && s.open) s.open->client_saw_registration = true;
      if (response.error_code == 0) return;
      const bool refusal = registers && !is_retried_error(response.error_code) && !is_fencing(response.error_code);
      if (refusal && !s.open && s.after_refusal && !s.ended.empty()) {
        // Refused again before anything of the next transaction got through: that next one is
        // refused too (the client aborts it without EndTxn), with what was added since the last
        // refusal.
        const TransactionRecord& last = s.ended.back();
        TxnClient client{last.transactional_id, last.listener, last.client_id, last.client_software};
        const TxnClock::time_point since = s.after_refusal->since;
        TransactionRecord& t = open_transaction(s, request_as_seen(r.api, r.producer_id, r.producer_epoch, &client), since);
        take_after_refusal(s, t, connection, r.api);
        t.transaction_version = 1;
        note_error(s, r.api, response, now);
        end(s, TxnOutcome::kAborted, now);
        s.after_refusal = IdState::AfterRefusal{now, {}, {}};
        return;
      }
      note_error(s, r.api, response, now);
      if (is_fencing(response.error_code) && s.open) {
        ++stats_.fencing_events;
        bool timed_out = s.timeout_ms > 0 && now - s.open->begin >= std::chrono::milliseconds(s.timeout_ms);
        // Past its timeout the coordinator has aborted it (or will at its next check): ended so.
        // Else it stays open (IdState::fencing_answer_on): a client that was not fenced after all
        // goes on with it and ends it with EndTxn (conformance scenario 11: franz-go, Sarama and
        // the Java 3.x client abort it after INVALID_PRODUCER_EPOCH on a Produce).
        if (timed_out) {
          const uint64_t sequence = s.open->sequence;
          end(s, TxnOutcome::kTimedOut, now);
          s.awaiting_end = IdState::LastEnd{sequence, r.producer_id, r.producer_epoch};  // the client's EndTxn is this one's
        } else if (!s.fencing_answer_on) {
          s.fencing_answer_on = connection;
          fencing_answers_[connection].push_back(s.open->transactional_id);
        }
      } else if (refusal && s.open && !s.open->client_saw_registration) {
        // Refused before the client saw the coordinator take anything of it: the client can only
        // abort, and does so without EndTxn (Java's TransactionManager sends none for a
        // transaction it never saw start). Ended here, or the client's next transaction would be
        // taken for more of this one; what follows may still be this one's abort
        // (IdState::AfterRefusal). When the broker had accepted it after all (a rule rewrote its
        // answer, or an earlier answer was lost), the coordinator keeps it open and folds the
        // client's next transaction into it: kproxy counts the two the client saw
        // (known_to_coordinator and the error's broker_error say so).
        end(s, TxnOutcome::kAborted, now);
        s.after_refusal = IdState::AfterRefusal{now, {}, {}};
      }
      return;
    }
  }
}

void TransactionTracker::keep_error(TransactionRecord& t, TxnError e) {
  if (emitting()) event_hook_(TxnEvent{TxnEvent::Kind::kError, t, current_connection_, e.api, {}, {}, &e});
  if (is_retried_error(e.error_code)) ++t.retries;
  if (t.errors.size() < TransactionRecord::kMaxErrors) t.errors.push_back(std::move(e));
  else ++t.errors_dropped;
}

TransactionRecord* TransactionTracker::ended_of(IdState& s, uint64_t generation) {
  for (auto t = s.ended.rbegin(); t != s.ended.rend(); ++t)
    if (t->sequence == generation) return &*t;
  return nullptr;
}

TransactionRecord* TransactionTracker::awaiting_end_of(IdState& s, int64_t producer_id, int16_t producer_epoch) {
  if (!s.awaiting_end || s.ended.empty()) return nullptr;
  if (s.awaiting_end->producer_id != producer_id || s.awaiting_end->producer_epoch != producer_epoch) return nullptr;
  TransactionRecord& t = s.ended.back();
  return t.sequence == s.awaiting_end->sequence ? &t : nullptr;
}

void TransactionTracker::attach_end_retry(IdState& s, TransactionRecord& t, const Pending& p, const TxnResponse& response,
                                          TxnClock::time_point now) {
  ++t.end_retries;
  if (response.error_code != 0) keep_error(t, TxnError{p.api, response.error_code, response.injected_by, now, response.broker_error_code});
  if (response.broker_code() != 0) return;
  // The coordinator's answer tells how a transaction kproxy could not know the end of ended:
  // - fenced when the client closed the connection of a fencing answer, but the coordinator still
  //   had it (the fencing was not the coordinator's) and has ended it as the client asks now;
  // - given up as silent (unknown), or past its timeout: a commit answered without error was
  //   committed, since the coordinator aborts a transaction past its timeout only when its periodic
  //   check comes round and a commit that came first wins
  //   (TransactionCoordinator.abortTimedOutTransactions). A late abort answered without error stays
  //   timed_out (transaction.version 2 answers it so after the timeout abort too).
  const bool fenced_on_close =
      t.outcome == TxnOutcome::kFenced && s.awaiting_end && s.awaiting_end->sequence == t.sequence && s.awaiting_end->fenced_on_close;
  if (fenced_on_close || t.outcome == TxnOutcome::kUnknown || (t.outcome == TxnOutcome::kTimedOut && p.commit)) {
    TxnOutcome outcome = p.commit ? TxnOutcome::kCommitted : TxnOutcome::kAborted;
    --stats_.ended[t.outcome];
    ++stats_.ended[outcome];
    t.outcome = outcome;
    // A fenced one was counted among the abort causes (with its cause) when it ended.
    if (outcome == TxnOutcome::kAborted && !fenced_on_close) ++stats_.abort_causes[{"client", false}];
  }
  if (response.delivered && response.error_code == 0) {
    t.end_acknowledged = t.end_acknowledged || t.outcome == TxnOutcome::kCommitted || t.outcome == TxnOutcome::kAborted;
    s.awaiting_end.reset();  // the client knows now
  }
}

bool TransactionTracker::end_in_flight(const IdState& s) {
  if (!s.open) return false;
  for (auto& [id, c] : connections_)
    for (size_t i = 0; i < c.pending.size(); ++i)
      if (c.pending[i].state == &s && c.pending[i].api == TxnApi::kEndTxn && c.pending[i].generation == s.open->sequence) return true;
  return false;
}

void TransactionTracker::end_superseded(IdState& s, TxnClock::time_point now) {
  s.superseded = false;
  if (s.open) end(s, TxnOutcome::kFenced, now);
}

void TransactionTracker::on_connection_closed(uint64_t connection) {
  std::lock_guard lock(mutex_);
  auto it = connections_.find(connection);
  if (it == connections_.end()) return;
  // An EndTxn of a superseded transaction that will never be answered: the new instance fenced it.
  std::vector<IdState*> superseded;
  for (size_t i = 0; i < it->second.pending.size(); ++i) {
    const Pending& p = it->second.pending[i];
    if (p.api == TxnApi::kEndTxn && p.state->superseded && p.state->open && p.state->open->sequence == p.generation)
      superseded.push_back(p.state);
  }
  pending_total_ -= it->second.pending.size();
  connections_.erase(it);
  pending_count_.store(pending_total_, std::memory_order_relaxed);
  current_connection_ = connection;
  for (IdState* s : superseded)
    if (s->superseded && !end_in_flight(*s)) end_superseded(*s, s->open->last_activity);
  // A transaction that got a fencing answer on this connection, and nothing since: the client
  // gave up on it (IdState::fencing_answer_on). Fenced, as it was told.
  if (auto f = fencing_answers_.find(connection); f != fencing_answers_.end()) {
    std::vector<std::string> names = std::move(f->second);
    fencing_answers_.erase(f);
    for (const std::string& name : names) {
      auto s = ids_.find(name);
      if (s == ids_.end() || !s->second.open || s->second.fencing_answer_on != connection) continue;
      const TransactionRecord& t = *s->second.open;
      IdState::LastEnd last{t.sequence, t.producer_id, t.producer_epoch, /*fenced_on_close=*/true};
      end(s->second, TxnOutcome::kFenced, t.last_activity);
      // Sarama closes its connections after the answer and comes back to abort: that EndTxn is this one's.
      s->second.awaiting_end = last;
    }
  }
}

void TransactionTracker::sweep(TxnClock::time_point now) {
  std::lock_guard lock(mutex_);
  current_connection_ = 0;  // ended by time, not by a frame
  for (auto it = connections_.begin(); it != connections_.end();) {
    filter_pending(it->second, [&](const Pending& p) { return now - p.sent < limits_.silent_after; });
    // A connection silent that long with nothing awaiting an answer (its close was not reported).
    if (it->second.pending.empty() && now - it->second.last_seen >= limits_.silent_after) it = connections_.erase(it);
    else ++it;
  }
  for (auto& [id, s] : ids_) {
    if (!s.open) continue;
    if (s.timeout_ms > 0) {
      // It ends when its time is up (when the coordinator may abort it), not when this sweep
      // happens to run: its duration is its timeout (or up to its last request, if later).
      auto deadline = s.open->begin + std::chrono::milliseconds(s.timeout_ms);
      if (now >= deadline) {
        // The client may still end it (TV2 answers its late abort without error): that EndTxn is this one's.
        s.awaiting_end = IdState::LastEnd{s.open->sequence, s.open->producer_id, s.open->producer_epoch};
        s.superseded = false;
        end(s, TxnOutcome::kTimedOut, std::max(deadline, s.open->last_activity));
      }
    } else if (now - s.open->last_activity >= limits_.silent_after) {
      s.awaiting_end = IdState::LastEnd{s.open->sequence, s.open->producer_id, s.open->producer_epoch};
      s.superseded = false;
      end(s, TxnOutcome::kUnknown, now);
    }
    sync_produce_retry(s);
  }
}

TransactionStats TransactionTracker::stats(TxnClock::time_point now) const {
  std::lock_guard lock(mutex_);
  TransactionStats out = stats_;
  out.open = 0;
  out.oldest_open_age = std::chrono::nanoseconds(0);
  for (const auto& [id, s] : ids_) {
    if (!s.open) continue;
    ++out.open;
    out.oldest_open_age = std::max(out.oldest_open_age, std::chrono::duration_cast<std::chrono::nanoseconds>(now - s.open->begin));
  }
  return out;
}

std::vector<TransactionRecord> TransactionTracker::open_transactions() const {
  std::lock_guard lock(mutex_);
  std::vector<TransactionRecord> out;
  for (const auto& [id, s] : ids_)
    if (s.open) out.push_back(*s.open);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  return out;
}

std::vector<TransactionRecord> TransactionTracker::history(const std::string& transactional_id) const {
  std::lock_guard lock(mutex_);
  std::vector<TransactionRecord> out;
  auto it = ids_.find(transactional_id);
  if (it == ids_.end()) return out;
  out.assign(it->second.ended.begin(), it->second.ended.end());
  if (it->second.open) out.push_back(*it->second.open);
  return out;
}

std::vector<TransactionRecord> TransactionTracker::recent_ended(size_t max) const {
  std::lock_guard lock(mutex_);
  struct Ended {
    const TransactionRecord* record;
    size_t position;  ///< in its id's history: of one id's, the later ended later when the times are equal
  };
  std::vector<Ended> all;
  for (const auto& [id, s] : ids_) {
    size_t position = 0;
    for (const auto& t : s.ended) all.push_back({&t, position++});
  }
  auto newer = [](const Ended& a, const Ended& b) {
    if (a.record->end != b.record->end) return a.record->end > b.record->end;
    if (a.record->transactional_id != b.record->transactional_id) return a.record->transactional_id < b.record->transactional_id;
    return a.position > b.position;
  };
  size_t n = std::min(max, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(), newer);
  std::vector<TransactionRecord> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(*all[i].record);
  return out;
}

}  // namespace kproxy::observe
