#include "proxy/chaos/answer_builder.h"

#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/response_header.h"
#include "codec/writer.h"

namespace kproxy::chaos {

namespace {

using namespace codec;

// The default response of `api_key` has a top-level error code at `version`.
bool has_top_level_error(int16_t api_key, int16_t version) {
  auto m = make_response(api_key);
  if (!m) return false;
  bool top = false;
  m->for_each_error_code(version, [&](int16_t&, const ErrorScope& s) { top = top || s.depth == 0; });
  return top;
}

bool has_builder(int16_t api_key) {
  switch (static_cast<ApiKey>(api_key)) {
    case ApiKey::kInitProducerId:
    case ApiKey::kAddPartitionsToTxn:
    case ApiKey::kAddOffsetsToTxn:
    case ApiKey::kTxnOffsetCommit:
    case ApiKey::kEndTxn:
    case ApiKey::kWriteTxnMarkers:
    case ApiKey::kDescribeTransactions:
    case ApiKey::kListTransactions:
    case ApiKey::kFindCoordinator:
    case ApiKey::kProduce: return true;
    default: return false;
  }
}

// Each builder follows what the broker writes on its error path (KafkaApis / TransactionCoordinator:
// the requested entries echoed, each with the code).
std::unique_ptr<Message> build(const Message& request, int16_t version, int16_t code) {
  switch (static_cast<ApiKey>(request.api_key())) {
    case ApiKey::kInitProducerId: {
      auto r = std::make_unique<InitProducerIdResponse>();
      r->error_code = code;
      r->producer_id = -1;
      r->producer_epoch = -1;
      return r;
    }
    case ApiKey::kAddPartitionsToTxn: {
      const auto& q = static_cast<const AddPartitionsToTxnRequest&>(request);
      auto r = std::make_unique<AddPartitionsToTxnResponse>();
      auto topics = [&](const std::vector<AddPartitionsToTxnRequest::AddPartitionsToTxnTopic>& in) {
        std::vector<AddPartitionsToTxnResponse::AddPartitionsToTxnTopicResult> out;
        for (const auto& t : in) {
          AddPartitionsToTxnResponse::AddPartitionsToTxnTopicResult tr;
          tr.name = t.name;
          for (int32_t p : t.partitions) {
            AddPartitionsToTxnResponse::AddPartitionsToTxnPartitionResult pr;
            pr.partition_index = p;
            pr.partition_error_code = code;
            tr.results_by_partition.push_back(pr);
          }
          out.push_back(std::move(tr));
        }
        return out;
      };
      if (version <= 3) {
        r->results_by_topic_v3_and_below = topics(q.v3_and_below_topics);
      } else {
        // v4+ (KIP-890 batched form): one result per transaction, codes per partition; the
        // top-level ErrorCode is for request-wide failures only (e.g. authorization).
        for (const auto& t : q.transactions) {
          AddPartitionsToTxnResponse::AddPartitionsToTxnResult tr;
          tr.transactional_id = t.transactional_id;
          tr.topic_results = topics(t.topics);
          r->results_by_transaction.push_back(std::move(tr));
        }
      }
      return r;
    }
    case ApiKey::kAddOffsetsToTxn: {
      auto r = std::make_unique<AddOffsetsToTxnResponse>();
      r->error_code = code;
      return r;
    }
    case ApiKey::kTxnOffsetCommit: {
      const auto& q = static_cast<const TxnOffsetCommitRequest&>(request);
      auto r = std::make_unique<TxnOffsetCommitResponse>();
      for (const auto& t : q.topics) {
        TxnOffsetCommitResponse::TxnOffsetCommitResponseTopic rt;
        rt.name = t.name;
        rt.topic_id = t.topic_id;
        for (const auto& p : t.partitions) {
          TxnOffsetCommitResponse::TxnOffsetCommitResponsePartition rp;
          rp.partition_index = p.partition_index;
          rp.error_code = code;
          rt.partitions.push_back(rp);
        }
        r->topics.push_back(std::move(rt));
      }
      return r;
    }
    case ApiKey::kEndTxn: {
      auto r = std::make_unique<EndTxnResponse>();
      r->error_code = code;
      return r;
    }
    case ApiKey::kWriteTxnMarkers: {
      const auto& q = static_cast<const WriteTxnMarkersRequest&>(request);
      auto r = std::make_unique<WriteTxnMarkersResponse>();
      for (const auto& m : q.markers) {
        WriteTxnMarkersResponse::WritableTxnMarkerResult mr;
        mr.producer_id = m.producer_id;
        for (const auto& t : m.topics) {
          WriteTxnMarkersResponse::WritableTxnMarkerTopicResult tr;
          tr.name = t.name;
          for (int32_t p : t.partition_indexes) {
            WriteTxnMarkersResponse::WritableTxnMarkerPartitionResult pr;
            pr.partition_index = p;
            pr.error_code = code;
            tr.partitions.push_back(pr);
          }
          mr.topics.push_back(std::move(tr));
        }
        r->markers.push_back(std::move(mr));
      }
      return r;
    }
    case ApiKey::kDescribeTransactions: {
      const auto& q = static_cast<const DescribeTransactionsRequest&>(request);
      auto r = std::make_unique<DescribeTransactionsResponse>();
      for (auto id : q.transactional_ids) {
        DescribeTransactionsResponse::TransactionState s;
        s.error_code = code;
        s.transactional_id = id;
        r->transaction_states.push_back(std::move(s));
      }
      return r;
    }
    case ApiKey::kListTransactions: {
      auto r = std::make_unique<ListTransactionsResponse>();
      r->error_code = code;
      return r;
    }
    case ApiKey::kFindCoordinator: {
      const auto& q = static_cast<const FindCoordinatorRequest&>(request);
      auto r = std::make_unique<FindCoordinatorResponse>();
      if (version <= 3) {
        r->error_code = code;
        r->error_message = std::nullopt;
        r->node_id = -1;
        r->port = -1;
      } else {
        for (auto key : q.coordinator_keys) {
          FindCoordinatorResponse::Coordinator c;
          c.key = key;
          c.node_id = -1;
          c.port = -1;
          c.error_code = code;
          c.error_message = std::nullopt;
          r->coordinators.push_back(std::move(c));
        }
      }
      return r;
    }
    case ApiKey::kProduce: {
      const auto& q = static_cast<const ProduceRequest&>(request);
      auto r = std::make_unique<ProduceResponse>();
      for (const auto& t : q.topic_data) {
        ProduceResponse::TopicProduceResponse rt;
        rt.name = t.name;
        rt.topic_id = t.topic_id;
        for (const auto& p : t.partition_data) {
          ProduceResponse::PartitionProduceResponse rp;
          rp.index = p.index;
          rp.error_code = code;
          rp.base_offset = -1;
          rp.log_append_time_ms = -1;
          rp.log_start_offset = -1;
          rt.partition_responses.push_back(std::move(rp));
        }
        r->responses.push_back(std::move(rt));
      }
      return r;
    }
    default: {
      auto r = make_response(request.api_key());
      if (!r) return nullptr;
      r->for_each_error_code(version, [&](int16_t& c, const ErrorScope& s) {
        if (s.depth == 0) c = code;
      });
      return r;
    }
  }
}

}  // namespace

std::string answer_refusal(int16_t api_key, int16_t version) {
  const char* name = codec::api_name(api_key);
  if (!name) return "unknown API key " + std::to_string(api_key);
  if (!codec::is_valid_version(api_key, version)) return std::string(name) + " v" + std::to_string(version) + " is unknown to kproxy";
  if (has_builder(api_key) || has_top_level_error(api_key, version)) return "";
  return std::string("kproxy cannot build an answer for ") + name + " v" + std::to_string(version) +
         ": its response has no top-level ErrorCode (use an 'error' action instead)";
}

std::unique_ptr<codec::Message> build_answer(const codec::Message& request, int16_t version, int16_t error_code) {
  if (!answer_refusal(request.api_key(), version).empty()) return nullptr;
  return build(request, version, error_code);
}

bool set_throttle_time(codec::Message& response, int16_t version, int32_t throttle_ms) {
  int32_t* field = response.throttle_time(version);  // generated: present at this version or nullptr
  if (!field) return false;
  *field = throttle_ms;
  return true;
}

}  // namespace kproxy::chaos
