// The Toxiproxy API's contract, docs/toxiproxy-api.openapi.yaml, as JSON: generated at build time
// by cmake/embed_openapi.py and served at GET /openapi.json on the toxiproxy port (as kproxy's
// admin API serves its own, proxy/admin/openapi_document.h).
#pragma once

#include <string_view>

namespace kproxy::toxiproxy {

/// The OpenAPI 3.1 document as compact JSON.
std::string_view openapi_json();

}  // namespace kproxy::toxiproxy
