#include "codec/api_versions.h"

namespace kproxy::codec {

namespace {

bool decode_at(Bytes body, int16_t version, ApiVersionsResponse& out, std::string* error) {
  Reader r(body);
  out.read(r, version);
  if (r.ok() && !r.at_end()) {
    r.fail(std::to_string(r.remaining()) + " bytes left after the body");
  }
  if (!r.ok() && error != nullptr) *error = r.error();
  return r.ok();
}

}  // namespace

int16_t decode_api_versions_response(Bytes body, int16_t requested_version, ApiVersionsResponse& out, std::string* error) {
  if (decode_at(body, requested_version, out, error)) return requested_version;
  // As Java's ApiVersionsResponse.parse: a broker that rejects the requested version replies
  // in v0 format (with UNSUPPORTED_VERSION), so any failure above v0 is retried at v0.
  if (requested_version > 0 && decode_at(body, 0, out, nullptr)) return 0;
  out = ApiVersionsResponse{};
  return -1;
}

}  // namespace kproxy::codec
