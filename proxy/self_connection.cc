#include "proxy/self_connection.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

namespace kproxy::proxy {

SelfConnectionDetector& SelfConnectionDetector::instance() {
  static SelfConnectionDetector detector;
  return detector;
}

std::string SelfConnectionDetector::endpoint_key(const sockaddr_storage& addr) {
  // Address and port bytes only (sockaddr padding may differ between getsockname and getpeername).
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    std::string k(1, '4');
    k.append(reinterpret_cast<const char*>(&a.sin_addr), sizeof(a.sin_addr));
    k.append(reinterpret_cast<const char*>(&a.sin_port), sizeof(a.sin_port));
    return k;
  }
  if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    std::string k(1, '6');
    k.append(reinterpret_cast<const char*>(&a.sin6_addr), sizeof(a.sin6_addr));
    k.append(reinterpret_cast<const char*>(&a.sin6_port), sizeof(a.sin6_port));
    return k;
  }
  return {};
}

std::string SelfConnectionDetector::connection_key(const sockaddr_storage& from, const sockaddr_storage& to) {
  std::string a = endpoint_key(from), b = endpoint_key(to);
  if (a.empty() || b.empty()) return {};
  return a + b;
}

bool SelfConnectionDetector::meet(std::unordered_set<std::string>& mine, const std::unordered_set<std::string>& theirs,
                                  const std::string& key) {
  if (key.empty()) return false;
  std::lock_guard lock(mutex_);
  if (theirs.contains(key)) return true;
  mine.insert(key);
  return false;
}

bool SelfConnectionDetector::accepted(const std::string& peer) { return meet(accepted_peers_, upstream_locals_, peer); }

bool SelfConnectionDetector::connected(const std::string& local) { return meet(upstream_locals_, accepted_peers_, local); }

void SelfConnectionDetector::forget(std::unordered_set<std::string>& set, const std::string& key) {
  if (key.empty()) return;
  std::lock_guard lock(mutex_);
  set.erase(key);
}

void SelfConnectionDetector::accepted_closed(const std::string& peer) { forget(accepted_peers_, peer); }

void SelfConnectionDetector::upstream_closed(const std::string& local) { forget(upstream_locals_, local); }

namespace {

/// `addr` with its address replaced by the unspecified one (0.0.0.0 or ::), port kept.
sockaddr_storage unspecified_like(const sockaddr_storage& addr) {
  sockaddr_storage out{};
  out.ss_family = addr.ss_family;
  if (addr.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in&>(out).sin_port = reinterpret_cast<const sockaddr_in&>(addr).sin_port;
  } else if (addr.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6&>(out).sin6_port = reinterpret_cast<const sockaddr_in6&>(addr).sin6_port;
  }
  return out;
}

/// True when `addr` is an address of this host: loopback, or one of its interfaces' addresses.
bool is_local_address(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr);
    if ((ip >> 24) == 127 || ip == 0) return true;
  } else if (addr.ss_family == AF_INET6) {
    const in6_addr& ip = reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&ip) || IN6_IS_ADDR_UNSPECIFIED(&ip)) return true;
  } else {
    return false;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != addr.ss_family) continue;
    if (addr.ss_family == AF_INET) {
      found = std::memcmp(&reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr,
                          sizeof(in_addr)) == 0;
    } else {
      found = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                          &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, sizeof(in6_addr)) == 0;
    }
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

void SelfConnectionDetector::listener_opened(const sockaddr_storage& local) {
  std::string k = endpoint_key(local);
  if (k.empty()) return;
  std::lock_guard lock(mutex_);
  ++listeners_[k];
}

void SelfConnectionDetector::listener_closed(const sockaddr_storage& local) {
  std::string k = endpoint_key(local);
  std::lock_guard lock(mutex_);
  auto it = listeners_.find(k);
  if (it != listeners_.end() && --it->second <= 0) listeners_.erase(it);
}

bool SelfConnectionDetector::is_own_listener(const sockaddr* target) const {
  sockaddr_storage addr{};
  if (target->sa_family == AF_INET) std::memcpy(&addr, target, sizeof(sockaddr_in));
  else if (target->sa_family == AF_INET6) std::memcpy(&addr, target, sizeof(sockaddr_in6));
  else return false;
  std::string exact = endpoint_key(addr);
  std::string any = endpoint_key(unspecified_like(addr));
  bool any_match;
  {
    std::lock_guard lock(mutex_);
    if (listeners_.contains(exact)) return true;
    any_match = listeners_.contains(any);
  }
  return any_match && is_local_address(addr);
}

size_t SelfConnectionDetector::size() const {
  std::lock_guard lock(mutex_);
  return accepted_peers_.size() + upstream_locals_.size() + listeners_.size();
}

}  // namespace kproxy::proxy
