#include "proxy/tap/tap_hub.h"

#include <algorithm>
#include <charconv>

#include "codec/generated/api_keys.h"

namespace kproxy::tap {

bool TapFilter::matches(const TapEventMeta& meta) const {
  if (transactions != meta.transaction) return false;
  if (api_key && *api_key != meta.api_key) return false;
  if (client_id && *client_id != meta.client_id) return false;
  if (connection && *connection != meta.connection) return false;
  if (response && *response != meta.response) return false;
  if (errors_only && (!meta.response || !meta.has_error)) return false;
  return true;
}

std::string parse_filter(const std::map<std::string, std::string>& query, TapFilter& out) {
  for (const auto& [key, value] : query) {
    if (key == "api") {
      if (auto k = codec::api_key_for_name(value)) {
        out.api_key = *k;
      } else {
        int n = 0;
        auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || p != value.data() + value.size() || n < 0 || n > 32767) return "unknown api '" + value + "'";
        out.api_key = static_cast<int16_t>(n);
      }
    } else if (key == "client_id") {
      out.client_id = value;
    } else if (key == "connection") {
      uint64_t n = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || p != value.data() + value.size()) return "connection must be a number, got '" + value + "'";
      out.connection = n;
    } else if (key == "direction") {
      if (value == "request") out.response = false;
      else if (value == "response") out.response = true;
      else if (value != "both" && !value.empty()) return "direction must be request, response or both, got '" + value + "'";
    } else if (key == "errors") {
      if (value == "true" || value == "1" || value.empty()) out.errors_only = true;
      else if (value == "false" || value == "0") out.errors_only = false;
      else return "errors must be true or false, got '" + value + "'";
    } else if (key == "transactions") {
      if (value == "true" || value == "1" || value.empty()) out.transactions = true;
      else if (value == "false" || value == "0") out.transactions = false;
      else return "transactions must be true or false, got '" + value + "'";
    } else {
      return "unknown tap filter '" + key + "' (api, client_id, connection, direction, errors, transactions)";
    }
  }
  return "";
}

bool Subscriber::offer(const std::string& line) {
  std::unique_lock lock(mutex_);
  if (closed_.load(std::memory_order_relaxed)) return false;
  if (queue_.size() >= limits_.queue_lines || queued_bytes_ + line.size() + 1 > limits_.queue_bytes) {
    ++dropped_since_read_;
    dropped_total_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  queue_.push_back(line);
  queued_bytes_ += line.size() + 1;
  lock.unlock();
  ready_.notify_one();
  return true;
}

std::string Subscriber::next(std::chrono::milliseconds timeout) {
  std::deque<std::string> taken;
  uint64_t dropped = 0;
  {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !queue_.empty() || dropped_since_read_ > 0 || closed_.load(); });
    taken.swap(queue_);
    queued_bytes_ = 0;
    dropped = dropped_since_read_;
    dropped_since_read_ = 0;
  }
  std::string out;
  if (dropped) out += "{\"dropped\":" + std::to_string(dropped) + "}\n";
  for (auto& line : taken) {
    out += line;
    out += '\n';
  }
  delivered_.fetch_add(taken.size(), std::memory_order_relaxed);
  return out;
}

void Subscriber::close() {
  closed_ = true;
  ready_.notify_all();
}

void TapHub::set_limits(const TapLimits& limits) {
  std::lock_guard lock(mutex_);
  limits_ = limits;
}

TapLimits TapHub::limits() const {
  std::lock_guard lock(mutex_);
  return limits_;
}

bool TapHub::wants(const TapEventMeta& meta) const {
  if (!active()) return false;
  std::lock_guard lock(mutex_);
  for (const auto& s : subscribers_) {
    TapFilter f = s->filter();
    if (f.errors_only && meta.response) f.errors_only = false;  // decided after decoding
    if (f.matches(meta)) return true;
  }
  return false;
}

bool TapHub::any_errors_only() const {
  std::lock_guard lock(mutex_);
  return std::any_of(subscribers_.begin(), subscribers_.end(), [](const auto& s) { return s->filter().errors_only; });
}

void TapHub::publish(const TapEventMeta& meta, const std::string& line) {
  std::lock_guard lock(mutex_);
  for (const auto& s : subscribers_) {
    if (!s->filter().matches(meta)) continue;
    if (!s->offer(line)) dropped_total_.add(0);
  }
  published_total_.fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<Subscriber> TapHub::subscribe(TapFilter filter) {
  std::lock_guard lock(mutex_);
  if (subscribers_.size() >= limits_.max_subscribers) return nullptr;
  auto s = std::make_shared<Subscriber>(std::move(filter), limits_);
  subscribers_.push_back(s);
  subscriber_count_.store(subscribers_.size());
  return s;
}

void TapHub::unsubscribe(const std::shared_ptr<Subscriber>& subscriber) {
  std::lock_guard lock(mutex_);
  subscriber->close();
  std::erase(subscribers_, subscriber);
  subscriber_count_.store(subscribers_.size());
}

void TapHub::close_all() {
  std::lock_guard lock(mutex_);
  for (const auto& s : subscribers_) s->close();
  subscribers_.clear();
  subscriber_count_.store(0);
}

}  // namespace kproxy::tap
