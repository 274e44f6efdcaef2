// ClientHelloReader: the server name (SNI, RFC 6066 section 3) a TLS client asks for, read from
// its ClientHello before any handshake runs, so that an SNI listener can pick the broker (and the
// certificate) a connection is for (issue #33).
//
//   socket bytes ──► feed() ──► TLS records (content type 22) ──► one handshake message ──► ClientHello
//                     │ buffered, at most `max_bytes`                                      └─► server_name()
//                     └─► bytes(): everything fed, for the TLS session to read afterwards
//
// The ClientHello may arrive in any number of TCP segments and may span several TLS records
// (RFC 8446 section 5.1 lets a handshake message be fragmented over records): feed() takes what
// came and says whether more is needed. It never reads past the records that hold the hello.
// Nothing here decrypts or answers: a reader only looks.
//
// Outcomes: kDone (server_name() is the normalised name, or nullopt when the client sent none or
// one that is not a DNS host name: raw_server_name() keeps what it sent, capped, for the log);
// kNotTls (the first byte is not a TLS handshake record: e.g. a plaintext Kafka client);
// kTooLarge (more than `max_bytes` before the hello was whole); kMalformed (lengths that do not
// add up, another handshake message first, a record over 2^14 bytes: error() says which).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec/reader.h"

namespace kproxy::tls {

/// What a parsed ClientHello says (parse_client_hello).
struct ClientHelloInfo {
  /// The host_name entry of the server_name extension, as sent (at most kMaxRawServerName
  /// bytes kept); empty when there is none.
  std::string raw_server_name;
  bool has_server_name = false;  ///< a host_name entry was present (even an empty or invalid one)
  /// raw_server_name normalised (normalize_server_name), nullopt when absent or not a host name.
  std::optional<std::string> server_name;
};

/// The raw name kept for logs: longer names are cut (a DNS name has at most 253 characters).
inline constexpr size_t kMaxRawServerName = 255;

/// Parses the body of a ClientHello handshake message (after its 4-byte header). "" or why not.
std::string parse_client_hello(codec::Bytes body, ClientHelloInfo& out);

/// `raw` as a DNS host name to match against configured names: ASCII letters lower-cased, one
/// trailing dot removed; nullopt when empty, longer than 253, or not letters, digits, hyphens
/// (and underscores, which some internal names carry) in dot-separated labels of 1-63
/// characters. An IP literal passes: see is_ip_literal.
std::optional<std::string> normalize_server_name(std::string_view raw);

/// True for an IPv4 dotted quad or an IPv6 literal (with or without brackets): names a client
/// never sends as SNI (RFC 6066 section 3), so a broker host pattern must not produce one.
bool is_ip_literal(std::string_view name);

class ClientHelloReader {
 public:
  enum class State : uint8_t { kNeedMore, kDone, kNotTls, kTooLarge, kMalformed };
  /// Default cap on the bytes read before the ClientHello is whole: its largest plausible size
  /// (many cipher suites, key shares for several groups, a PSK, padding) with room to spare.
  static constexpr size_t kDefaultMaxBytes = 16 * 1024;

  explicit ClientHelloReader(size_t max_bytes = kDefaultMaxBytes) : max_bytes_(max_bytes) {}

  /// Takes the next bytes from the socket. Once the state is not kNeedMore, further bytes are
  /// not looked at (nor kept: the caller hands them to the TLS session after bytes()).
  State feed(codec::Bytes data);
  State state() const { return state_; }
  /// Everything fed while the state was kNeedMore (the TLS session must read these first).
  const std::vector<uint8_t>& bytes() const { return buffered_; }
  const ClientHelloInfo& hello() const { return hello_; }
  const std::optional<std::string>& server_name() const { return hello_.server_name; }
  /// Why kMalformed, kTooLarge or kNotTls.
  const std::string& error() const { return error_; }
  /// "need_more", "done", "not_tls", "too_large", "malformed".
  static const char* state_name(State state);

 private:
  State parse();

  size_t max_bytes_;
  State state_ = State::kNeedMore;
  std::vector<uint8_t> buffered_;
  std::vector<uint8_t> message_;  ///< the handshake message so far, reassembled from records
  size_t records_end_ = 0;        ///< bytes of buffered_ that were whole records, already in message_
  ClientHelloInfo hello_;
  std::string error_;
};

}  // namespace kproxy::tls
