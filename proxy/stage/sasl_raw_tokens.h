// SaslRawTokens: tracks the raw-token phase that follows a SaslHandshake v0.
//
// After a SaslHandshake v0 request (Kafka's SaslClientAuthenticator without SaslAuthenticate),
// SASL tokens travel as bare size-prefixed frames with no Kafka header and no correlation id,
// until authentication completes (docs/protocol.md "SASL"). The proxy must pass them through untouched and
// must not mistake them for requests. A proxy cannot see when the SASL exchange completes, so:
//
//  - for mechanisms whose exchange has a fixed number of client tokens, each answered by one
//    server token, count them: PLAIN 1 (RFC 4616), SCRAM-SHA-256/512 2 (RFC 5802: client-first,
//    client-final), OAUTHBEARER 1 (RFC 7628; a failure makes the broker close the connection);
//  - for any other mechanism (GSSAPI, whose tokens may go unanswered), a frame is a raw token
//    unless it parses as a request header of a known API and version.
#pragma once

#include <cstdint>
#include <string_view>

namespace kproxy::stage {

class SaslRawTokens {
 public:
  /// A SaslHandshake v0 naming `mechanism` was forwarded: raw tokens follow.
  void begin(std::string_view mechanism);

  /// True while the client's frames may be raw tokens.
  bool active() const { return active_; }

  /// Classifies the next client frame while active(). `parses_as_request`: the frame reads as a
  /// request header of a known API and version. Returns true when it is a raw token (forward it
  /// untouched; its answer is a raw token too), false when it is a Kafka request (phase over).
  bool is_raw_token(bool parses_as_request);

  /// Whether each raw token is answered by exactly one raw token from the broker.
  bool tokens_are_answered() const { return tokens_left_ >= 0; }

 private:
  bool active_ = false;
  int tokens_left_ = -1;  ///< -1: unknown mechanism, classify by header
};

}  // namespace kproxy::stage
