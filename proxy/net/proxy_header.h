// ProxyHeaderReader: the PROXY protocol version 2 header a load balancer (HAProxy's
// `send-proxy-v2`, AWS NLB, Envoy) puts in front of a connection's first byte, naming the client
// it accepted the connection from (issue #33). Specification: HAProxy's "The PROXY protocol"
// (proxy-protocol.txt, section 2.2 for version 2).
//
//   socket bytes ──► feed() ──► 16-byte preamble (signature, version/command, family, length)
//                                └─► addresses + TLVs ──► header(): client address, authority TLV
//                   rest(): the bytes after the header, the connection's own first bytes
//
// A listener that asks for the header takes it from every connection, before TLS or Kafka bytes;
// a connection without a valid one is refused (kRefused, reason()). A listener that does not
// ask never looks (a client could otherwise forge its own address). Version 1 (the text form,
// "PROXY TCP4 ...") is recognised only to say so in the refusal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codec/reader.h"

namespace kproxy::net {

/// What a PROXY v2 header says.
struct ProxyHeader {
  /// PROXY: the connection is relayed for a client; LOCAL: the load balancer's own (a health
  /// check): no addresses, the connection's own ones stand.
  bool local = false;
  /// "a.b.c.d:port" or "[v6]:port" of the client and of the address it connected to; "" for
  /// LOCAL, for the UNSPEC family and for UNIX sockets.
  std::string source;
  std::string destination;
  /// PP2_TYPE_AUTHORITY (0x02): the host name the client asked for (the SNI the load balancer
  /// saw when it ended TLS); nullopt when absent.
  std::optional<std::string> authority;
};

class ProxyHeaderReader {
 public:
  enum class State : uint8_t { kNeedMore, kDone, kRefused };
  /// Cap on the header's size: the 16-byte preamble plus addresses and TLVs. Load balancers send
  /// a few hundred bytes at most (AWS adds a VPC endpoint id, Azure a link id).
  static constexpr size_t kDefaultMaxBytes = 4096;

  explicit ProxyHeaderReader(size_t max_bytes = kDefaultMaxBytes) : max_bytes_(max_bytes) {}

  /// Takes the next bytes from the socket. After kDone, rest() holds what followed the header
  /// in the bytes fed so far; later bytes are not looked at.
  State feed(codec::Bytes data);
  State state() const { return state_; }
  const ProxyHeader& header() const { return header_; }
  /// The bytes fed after the header (kDone only).
  codec::Bytes rest() const;
  /// Why kRefused, e.g. "no PROXY protocol v2 signature (a client connecting directly?)".
  const std::string& reason() const { return reason_; }
  /// A short label for the refusal counter: "no_signature", "version_1", "bad_version",
  /// "bad_command", "bad_family", "too_large", "malformed"; "" unless kRefused.
  const char* refusal_label() const { return refusal_label_; }

 private:
  State refuse(const char* label, std::string reason);
  State parse();

  size_t max_bytes_;
  State state_ = State::kNeedMore;
  std::vector<uint8_t> buffered_;
  size_t header_size_ = 0;  ///< known once the preamble is in
  ProxyHeader header_;
  std::string reason_;
  const char* refusal_label_ = "";
};

}  // namespace kproxy::net
