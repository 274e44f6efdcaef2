#include "proxy/stage/request_fields.h"

namespace kproxy::stage {

std::optional<int16_t> produce_request_acks(codec::Bytes body, int16_t version) {
  codec::Reader r(body);
  r.set_message("ProduceRequest", version);
  if (version >= 3) {
    r.set_field("TransactionalId");
    (void)r.nullable_string(version >= kProduceFirstFlexibleVersion);
  }
  r.set_field("Acks");
  int16_t acks = r.int16();
  if (!r.ok()) return std::nullopt;
  return acks;
}

std::optional<std::string_view> sasl_handshake_mechanism(codec::Bytes body) {
  codec::Reader r(body);
  r.set_message("SaslHandshakeRequest", 0);
  r.set_field("Mechanism");
  std::string_view mechanism = r.string(false);
  if (!r.ok()) return std::nullopt;
  return mechanism;
}

}  // namespace kproxy::stage
