// The admin API's contract, docs/admin-api.openapi.yaml, as JSON: generated at build time by
// cmake/embed_openapi.py (so kproxy serves exactly the document in the repository it was built
// from) and served at GET /openapi.json.
#pragma once

#include <string_view>

namespace kproxy::admin {

/// The OpenAPI 3.1 document as compact JSON.
std::string_view openapi_json();

}  // namespace kproxy::admin
