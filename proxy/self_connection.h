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
// counted in kproxy_proxy_self_connections_total.
#pragma once

#include <sys/socket.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace kproxy::proxy {

class SelfConnectionDetector {
 public:
  /// The process's detector (connections on every worker register with it).
  static SelfConnectionDetector& instance();

  /// The key of a socket endpoint (address and port bytes; "" for other families).
  static std::string endpoint_key(const sockaddr_storage& addr);
  /// The key of a TCP connection from `from` to `to` ("" if either is not IPv4/IPv6): 14 bytes
  /// for IPv4, within the inline capacity of a std::string, so a connection keeps its key
  /// without a heap allocation.
  static std::string connection_key(const sockaddr_storage& from, const sockaddr_storage& to);

  /// A connection kproxy accepted, keyed from its peer to kproxy. True when it is one of
  /// kproxy's own upstream connections: kproxy is talking to itself.
  bool accepted(const std::string& connection);
  /// An upstream connection kproxy made, keyed from kproxy to the broker. True when kproxy
  /// accepted that very connection: the upstream is kproxy itself.
  bool connected(const std::string& connection);
  /// The connection closed: forget it (the kernel may reuse the four-tuple).
  void accepted_closed(const std::string& connection);
  void upstream_closed(const std::string& connection);

  /// A listening socket opened on / closed from `local` (workers each open their own: counted).
  void listener_opened(const sockaddr_storage& local);
  void listener_closed(const sockaddr_storage& local);
  /// True when connecting to `target` would reach one of kproxy's own listening sockets.
  bool is_own_listener(const sockaddr* target) const;

  /// Endpoints registered now (tests).
  size_t size() const;

 private:
  /// One end registers `key` in `mine` unless the other end is already in `theirs` (then true).
  bool meet(std::unordered_set<std::string>& mine, const std::unordered_set<std::string>& theirs, const std::string& key);
  void forget(std::unordered_set<std::string>& set, const std::string& key);

  mutable std::mutex mutex_;
  std::unordered_set<std::string> accepted_peers_;
  std::unordered_set<std::string> upstream_locals_;
  std::unordered_map<std::string, int> listeners_;  ///< endpoint key -> sockets open on it
};

}  // namespace kproxy::proxy
