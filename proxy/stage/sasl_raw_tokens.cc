#include "proxy/stage/sasl_raw_tokens.h"

namespace kproxy::stage {

void SaslRawTokens::begin(std::string_view mechanism) {
  active_ = true;
  if (mechanism == "PLAIN" || mechanism == "OAUTHBEARER") tokens_left_ = 1;
  else if (mechanism == "SCRAM-SHA-256" || mechanism == "SCRAM-SHA-512") tokens_left_ = 2;
  else tokens_left_ = -1;
}

bool SaslRawTokens::is_raw_token(bool parses_as_request) {
  if (!active_) return false;
  if (tokens_left_ < 0) {
    if (parses_as_request) active_ = false;
    return active_;
  }
  if (--tokens_left_ == 0) active_ = false;
  return true;
}

}  // namespace kproxy::stage
