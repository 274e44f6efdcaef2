#include "config/sni_config.h"

#include <arpa/inet.h>

#include <charconv>
#include <limits>

namespace kproxy::config {

namespace {

constexpr std::string_view kNodeIdPlaceholder = "$(nodeId)";
constexpr std::string_view kListenerPlaceholder = "$(listener)";

}  // namespace

std::optional<BrokerHostPattern> BrokerHostPattern::make(std::string_view pattern, std::string* error) {
  size_t at = pattern.find(kNodeIdPlaceholder);
  if (at == std::string_view::npos) {
    if (error) *error = "'" + std::string(pattern) + "' has no $(nodeId): every broker would get the same name";
    return std::nullopt;
  }
  if (pattern.find(kNodeIdPlaceholder, at + 1) != std::string_view::npos) {
    if (error) *error = "'" + std::string(pattern) + "' has $(nodeId) more than once";
    return std::nullopt;
  }
  BrokerHostPattern p;
  p.prefix_ = std::string(pattern.substr(0, at));
  p.suffix_ = std::string(pattern.substr(at + kNodeIdPlaceholder.size()));
  if (p.prefix_.find("$(") != std::string::npos || p.suffix_.find("$(") != std::string::npos) {
    if (error) *error = "'" + std::string(pattern) + "' has a placeholder other than $(nodeId) and $(listener)";
    return std::nullopt;
  }
  return p;
}

std::string BrokerHostPattern::render(int32_t node_id) const { return prefix_ + std::to_string(node_id) + suffix_; }

std::optional<int32_t> BrokerHostPattern::match(std::string_view name) const {
  if (name.size() <= prefix_.size() + suffix_.size()) return std::nullopt;
  if (name.substr(0, prefix_.size()) != prefix_ || name.substr(name.size() - suffix_.size()) != suffix_) return std::nullopt;
  std::string_view digits = name.substr(prefix_.size(), name.size() - prefix_.size() - suffix_.size());
  // render() writes node ids in this form only: "07" or "+7" would be a second name for node 7.
  if (digits.size() > 1 && digits.front() == '0') return std::nullopt;
  int32_t id = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || end != digits.data() + digits.size() || id < 0) return std::nullopt;
  return id;
}

std::string replace_listener_placeholder(std::string_view pattern, std::string_view listener_name) {
  std::string out;
  size_t from = 0;
  for (size_t at; (at = pattern.find(kListenerPlaceholder, from)) != std::string_view::npos; from = at + kListenerPlaceholder.size()) {
    out.append(pattern.substr(from, at - from));
    out.append(listener_name);
  }
  out.append(pattern.substr(from));
  return out;
}

bool is_address_literal(std::string_view name) {
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  if (name.empty() || name.size() >= 64) return false;
  std::string text(name);
  unsigned char buf[16];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

}  // namespace kproxy::config
