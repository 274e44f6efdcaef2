// Decoding ApiVersions responses the way Kafka's clients do, including the v0 fallback.
//
// A broker that does not support the ApiVersions version a client asked for answers with a
// *version 0* body (ErrorCode 35 UNSUPPORTED_VERSION plus the ApiVersions range it supports), whatever
// version was requested. Decoding that body at the requested version fails or misreads it, so Java's
// ApiVersionsResponse.parse(Readable, short) retries at version 0 when parsing at the requested
// version fails. kproxy does the same (docs/protocol.md "The v0 fallback"; peers broke on it: kroxylicious #1611).
#pragma once

#include <cstdint>
#include <string>

#include "codec/generated/messages/api_versions.h"
#include "codec/reader.h"

namespace kproxy::codec {

/// Decodes an ApiVersions response body (no header) sent in reply to a request of
/// `requested_version`. On failure at that version (and requested_version > 0) retries at v0.
/// Returns the version the body was decoded at, or -1 if it decodes at neither (then `*error`,
/// if given, holds the reader's error at the requested version).
int16_t decode_api_versions_response(Bytes body, int16_t requested_version, ApiVersionsResponse& out, std::string* error = nullptr);

}  // namespace kproxy::codec
