#include "proxy/stage/sasl_raw_tokens.h"

#include <doctest/doctest.h>

using kproxy::stage::SaslRawTokens;

TEST_CASE("PLAIN: one token, then requests") {
  SaslRawTokens s;
  CHECK_FALSE(s.active());
  s.begin("PLAIN");
  CHECK(s.active());
  CHECK(s.tokens_are_answered());
  CHECK(s.is_raw_token(false));
  CHECK_FALSE(s.active());
  CHECK_FALSE(s.is_raw_token(true));
}

TEST_CASE("SCRAM: two tokens, even if one looks like a request") {
  SaslRawTokens s;
  s.begin("SCRAM-SHA-512");
  CHECK(s.is_raw_token(true));
  CHECK(s.active());
  CHECK(s.is_raw_token(false));
  CHECK_FALSE(s.active());
}

TEST_CASE("unknown mechanisms: tokens until a frame parses as a request") {
  SaslRawTokens s;
  s.begin("GSSAPI");
  CHECK_FALSE(s.tokens_are_answered());
  CHECK(s.is_raw_token(false));
  CHECK(s.is_raw_token(false));
  CHECK_FALSE(s.is_raw_token(true));
  CHECK_FALSE(s.active());
  // Re-authentication (KIP-368) starts a new phase.
  s.begin("PLAIN");
  CHECK(s.active());
}
