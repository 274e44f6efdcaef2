// ProxyCounters: process-wide counters of what the proxy saw and did.
//
// Plain relaxed atomics in one struct, reached through a reference that code takes once (at
// connection setup), so the hot path increments a field and never looks a counter up by name.
// The metrics work exports these through prometheus-cpp; per-API tables are indexed by api key.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace kproxy::proxy {

/// Api keys below this get their own slot in per-API tables; others count in *_other.
inline constexpr int kApiKeySlots = 128;

struct ProxyCounters {
  using Counter = std::atomic<uint64_t>;

  Counter connections_accepted{0};
  Counter connections_refused{0};      ///< over limits.max_connections
  std::atomic<int64_t> connections_open{0};
  Counter upstream_connect_failures{0};
  Counter upstream_disconnects{0};     ///< broker closed while the client was connected

  std::array<Counter, kApiKeySlots> requests_by_api{};
  Counter requests_other_api{0};       ///< api keys >= kApiKeySlots (e.g. vendor keys > 10000)
  Counter requests_unknown_version{0}; ///< api key or version not in the codec: forwarded untouched
  Counter requests_without_response{0};///< Produce acks=0
  Counter responses{0};
  Counter sasl_raw_tokens{0};          ///< SaslHandshake v0 raw-token frames passed through

  Counter request_bytes{0};
  Counter response_bytes{0};

  Counter framing_errors{0};           ///< negative or oversized size prefix
  Counter tls_on_plaintext{0};         ///< TLS ClientHello on a plaintext port
  Counter tls_failures{0};             ///< TLS handshakes or records that failed (either leg)
  Counter malformed_requests{0};       ///< header or needed body fields do not parse
  Counter malformed_responses{0};      ///< response that had to be decoded and did not parse
  Counter unexpected_responses{0};     ///< response with nothing in flight
  Counter correlation_mismatches{0};

  Counter responses_rewritten{0};      ///< broker addresses replaced
  Counter broker_ports_opened{0};
  Counter broker_port_failures{0};     ///< no port left, or bind failed
  Counter loops_closed_uncleanly{0};   ///< a worker loop still had handles at uv_loop_close (a bug)

  void count_request(int16_t api_key) {
    if (api_key >= 0 && api_key < kApiKeySlots) requests_by_api[static_cast<size_t>(api_key)].fetch_add(1, std::memory_order_relaxed);
    else requests_other_api.fetch_add(1, std::memory_order_relaxed);
  }
};

/// Adds one, relaxed (the counters only need to be eventually visible to a reader).
inline void bump(ProxyCounters::Counter& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

/// The process's counters.
ProxyCounters& counters();

}  // namespace kproxy::proxy
