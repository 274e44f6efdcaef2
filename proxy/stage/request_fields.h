// A few request fields the proxy core needs, read straight from the body without decoding it.
//
// The in-flight FIFO must know whether a Produce expects a response (acks=0 gets none,
// docs/protocol.md "Produce acks=0"), and the SASL tracking needs the mechanism of a SaslHandshake v0. Reading two
// leading fields by hand keeps Produce bodies (and their records) undecoded on the hot path.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "codec/reader.h"

namespace kproxy::stage {

/// First flexible version of ProduceRequest (Kafka's ProduceRequest.json: "flexibleVersions": "9+").
inline constexpr int16_t kProduceFirstFlexibleVersion = 9;

/// Acks of a ProduceRequest body (after the header): TransactionalId (nullable string, compact
/// from v9; absent before v3), then Acks int16. nullopt when the body is too short to hold them.
std::optional<int16_t> produce_request_acks(codec::Bytes body, int16_t version);

/// Mechanism of a SaslHandshakeRequest body (a classic string in v0 and v1), or nullopt.
std::optional<std::string_view> sasl_handshake_mechanism(codec::Bytes body);

}  // namespace kproxy::stage
