#include "proxy/net/self_connection.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace kproxy::net {

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

namespace {
/// splitmix64's finaliser: every input bit moves about half of the output bits.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
}  // namespace

ConnectionKey SelfConnectionDetector::connection_key(const sockaddr_storage& from, const sockaddr_storage& to) {
  if (from.ss_family == AF_INET && to.ss_family == AF_INET) {
    const auto& f = reinterpret_cast<const sockaddr_in&>(from);
    const auto& t = reinterpret_cast<const sockaddr_in&>(to);
    return {(uint64_t{f.sin_addr.s_addr} << 32) | t.sin_addr.s_addr, (uint64_t{1} << 63) | (uint64_t{f.sin_port} << 16) | t.sin_port};
  }
  std::string a = endpoint_key(from), b = endpoint_key(to);
  if (a.empty() || b.empty()) return {};
  std::string bytes = a + b;  // 38 bytes for IPv6 (a mixed pair: no connection has one)
  uint64_t h1 = 0x243F6A8885A308D3ULL, h2 = 0x13198A2E03707344ULL;
  for (size_t i = 0; i < bytes.size(); i += 8) {
    uint64_t chunk = 0;
    std::memcpy(&chunk, bytes.data() + i, std::min<size_t>(8, bytes.size() - i));
    h1 = mix(h1 ^ chunk);
    h2 = mix(h2 + chunk * 0x9E3779B97F4A7C15ULL);
  }
  ConnectionKey k{h1, h2 & ~(uint64_t{1} << 63)};  // top bit clear: never equal to an IPv4 key
  if (k.empty()) k.high = 1;
  return k;
}

bool SelfConnectionDetector::meet(KeySet& mine, const KeySet& theirs, const ConnectionKey& key) {
  if (key.empty()) return false;
  std::lock_guard lock(mutex_);
  if (theirs.contains(key)) return true;
  mine.insert(key);
  return false;
}

bool SelfConnectionDetector::accepted(const ConnectionKey& peer) { return meet(accepted_peers_, upstream_locals_, peer); }

bool SelfConnectionDetector::connected(const ConnectionKey& local) { return meet(upstream_locals_, accepted_peers_, local); }

void SelfConnectionDetector::forget(KeySet& set, const ConnectionKey& key) {
  if (key.empty()) return;
  std::lock_guard lock(mutex_);
  set.erase(key);
}

void SelfConnectionDetector::accepted_closed(const ConnectionKey& peer) { forget(accepted_peers_, peer); }

void SelfConnectionDetector::upstream_closed(const ConnectionKey& local) { forget(upstream_locals_, local); }

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
      found = std::memcmp(&reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr,
                          &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, sizeof(in_addr)) == 0;
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

bool SelfConnectionDetector::advertises_kproxy(const std::string& host, uint16_t port, const std::string& listen_host,
                                               uint16_t opening) const {
  // An IP literal (brackets of "[::1]" already gone in a HostPort), or localhost.
  auto literal = [](const std::string& h, uint16_t p, sockaddr_storage& out) {
    out = {};
    std::string ip = h == "localhost" ? "127.0.0.1" : h;
    auto* a4 = reinterpret_cast<sockaddr_in*>(&out);
    if (inet_pton(AF_INET, ip.c_str(), &a4->sin_addr) == 1) {
      a4->sin_family = AF_INET;
      a4->sin_port = htons(p);
      return true;
    }
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&out);
    if (inet_pton(AF_INET6, ip.c_str(), &a6->sin6_addr) == 1) {
      a6->sin6_family = AF_INET6;
      a6->sin6_port = htons(p);
      return true;
    }
    return false;
  };
  sockaddr_storage target{};
  if (!literal(host, port, target)) return false;
  if (is_own_listener(reinterpret_cast<const sockaddr*>(&target))) return true;
  if (port != opening) return false;
  // The port about to open: it will serve `target` when the listen host is the target's
  // address, or unspecified and the target is an address of this host.
  sockaddr_storage bound{};
  if (listen_host.empty() || listen_host == "0.0.0.0" || listen_host == "::") return is_local_address(target);
  return literal(listen_host, port, bound) && endpoint_key(bound) == endpoint_key(target);
}

size_t SelfConnectionDetector::size() const {
  std::lock_guard lock(mutex_);
  return accepted_peers_.size() + upstream_locals_.size() + listeners_.size();
}

}  // namespace kproxy::net
