// SelfConnectionDetector: finds kproxy connecting to itself.
//
// A broker whose advertised.listeners name kproxy's own address (a common slip when kproxy is
// put in front of a cluster) makes kproxy forward a client to a port of its own: the accepted
// connection connects upstream to kproxy again, and again, until limits.max_connections stops
// the chain (65 client attempts once made 19,448 connections). Two checks stop it:
//
//  1. Before connecting: the broker's resolved address is one kproxy listens on (its listeners
//     register here; an unspecified listen address matches every address of this host). The
//     connect is refused, so no second connection is ever made.
//  2. Backstop, for what (1) cannot see (a port forward or NAT in between): an accepted
//     connection is one of kproxy's own upstream sockets seen from the other end (the same
//     four-tuple: source address and port, destination address and port; the source port alone
//     is not enough, the kernel gives one local port to many connections to different peers).
//     Both ends register, under one lock, whichever happens first (the accept and the connect
//     callback come in either order, on the same or different workers), and the second finds
//     the match.
//
// Either way the connection is closed with a log line that says what is misconfigured and
// counted in kproxy_proxy_self_connections_total. And before any of it, a broker a response names
// at one of kproxy's own addresses gets no broker port at all (advertises_kproxy).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace kproxy::net {

/// A TCP connection's four-tuple in 16 bytes: every connection holds two (its accepted and its
/// upstream socket), and so does the detector, so they are kept small. IPv4 is stored exactly
/// (addresses and ports, the top bit of `low` marks it); an IPv6 four-tuple (36 bytes) is
/// folded into 127 bits by two independent 64-bit mixes: two distinct IPv6 connections share a
/// key with a chance of about 2^-127, and a shared key could only refuse one connection.
struct ConnectionKey {
  uint64_t high = 0;
  uint64_t low = 0;
  bool empty() const { return high == 0 && low == 0; }
  bool operator==(const ConnectionKey&) const = default;
};

struct ConnectionKeyHash {
  size_t operator()(const ConnectionKey& k) const noexcept { return static_cast<size_t>(k.high * 0x9E3779B97F4A7C15ULL ^ k.low); }
};

class SelfConnectionDetector {
 public:
  // One per process, owned by its services (proxy/stage/services.h): connections on every
  // worker register with it.

  /// The key of a socket endpoint (address and port bytes; "" for other families).
  static std::string endpoint_key(const sockaddr_storage& addr);
  /// The key of a TCP connection from `from` to `to` (empty if either is not IPv4/IPv6).
  static ConnectionKey connection_key(const sockaddr_storage& from, const sockaddr_storage& to);

  /// A connection kproxy accepted, keyed from its peer to kproxy. True when it is one of
  /// kproxy's own upstream connections: kproxy is talking to itself.
  bool accepted(const ConnectionKey& connection);
  /// An upstream connection kproxy made, keyed from kproxy to the broker. True when kproxy
  /// accepted that very connection: the upstream is kproxy itself.
  bool connected(const ConnectionKey& connection);
  /// The connection closed: forget it (the kernel may reuse the four-tuple).
  void accepted_closed(const ConnectionKey& connection);
  void upstream_closed(const ConnectionKey& connection);

  /// A listening socket opened on / closed from `local` (workers each open their own: counted).
  void listener_opened(const sockaddr_storage& local);
  void listener_closed(const sockaddr_storage& local);
  /// True when connecting to `target` would reach one of kproxy's own listening sockets.
  bool is_own_listener(const sockaddr* target) const;
  /// True when a broker a response names at `host`:`port` is kproxy itself, checked before a
  /// broker port is opened for it (a broker whose advertised.listeners name kproxy): `host` an IP
  /// literal or "localhost" that one of kproxy's listening sockets serves on `port`, or the very
  /// port `opening` about to be opened on `listen_host` (the port kproxy gives that broker). A
  /// host name is not resolved here: the connect's own check (is_own_listener) sees it.
  bool advertises_kproxy(const std::string& host, uint16_t port, const std::string& listen_host, uint16_t opening) const;

  /// Endpoints registered now (tests).
  size_t size() const;

 private:
  /// One end registers `key` in `mine` unless the other end is already in `theirs` (then true).
  using KeySet = std::unordered_set<ConnectionKey, ConnectionKeyHash>;
  bool meet(KeySet& mine, const KeySet& theirs, const ConnectionKey& key);
  void forget(KeySet& set, const ConnectionKey& key);

  mutable std::mutex mutex_;
  KeySet accepted_peers_;
  KeySet upstream_locals_;
  std::unordered_map<std::string, int> listeners_;  ///< endpoint key -> sockets open on it
};

}  // namespace kproxy::net
