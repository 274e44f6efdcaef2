// InflightRequests: the requests of one client connection that still await a response.
//
// A Kafka broker answers the requests of one connection one at a time, in order (docs/protocol.md "Response order"),
// so a FIFO pairs each response with its request: the front entry says which API and version the
// next response frame is, and which correlation id it must carry. Requests that get no response
// (Produce acks=0) never enter. SASL v0 raw tokens enter as kSaslToken: their answers have no
// Kafka header and pass through untouched.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace kproxy::proxy {

struct InflightRequest {
  enum class Kind : uint8_t {
    kKafka,      ///< a request with a Kafka header; its response has one too
    kSaslToken,  ///< a raw SASL token after SaslHandshake v0; its answer is a raw token
  };
  Kind kind = Kind::kKafka;
  int16_t api_key = -1;
  int16_t api_version = -1;
  int32_t correlation_id = 0;
  /// Response header version from the codec tables; -1 for APIs or versions kproxy does not know.
  int8_t response_header_version = -1;
  std::chrono::steady_clock::time_point sent_at;
};

class InflightRequests {
 public:
  void push(const InflightRequest& r) { items_.push_back(r); }
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  const InflightRequest& front() const { return items_[head_]; }
  /// Removes and returns the oldest entry. Requires !empty().
  InflightRequest pop() {
    InflightRequest r = items_[head_++];
    if (head_ == items_.size()) {
      head_ = 0;
      items_.clear();
      // Keep at most a small buffer for reuse: idle connections stay small (issue #4 target).
      if (items_.capacity() > kKeptCapacity) std::vector<InflightRequest>().swap(items_);
    } else if (head_ >= kKeptCapacity && head_ * 2 >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<ptrdiff_t>(head_));
      head_ = 0;
    }
    return r;
  }

 private:
  static constexpr size_t kKeptCapacity = 16;
  std::vector<InflightRequest> items_;
  size_t head_ = 0;
};

}  // namespace kproxy::proxy
