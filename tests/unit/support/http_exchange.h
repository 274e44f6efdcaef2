// A blocking HTTP/1.1 exchange with a server on 127.0.0.1, for the admin server's unit tests:
// they run the server on its own thread and talk to it the way curl or a kubelet probe would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kproxy::testing {

/// A blocking TCP socket connected to 127.0.0.1:port, or -1 when the connection is refused.
int loopback_connect(uint16_t port);

/// Sends `raw` (a whole request, or deliberately less) to 127.0.0.1:port, then reads until the
/// server closes, `max_read` bytes have arrived or `timeout_seconds` pass without a byte; returns
/// everything read. Fails the test (doctest REQUIRE) when the connection is refused.
std::string http_exchange(uint16_t port, const std::string& raw, size_t max_read = 1 << 20, int timeout_seconds = 10);

/// The status code of a raw HTTP response ("HTTP/1.1 404 ..." -> 404), or -1 when there is none.
int http_status_of(const std::string& response);

}  // namespace kproxy::testing
