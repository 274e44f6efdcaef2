// The HTTP/1.1 framing the admin server reads and writes (RFC 9112): the request head a client
// sends, and the status line and headers kproxy sends back. Pure functions over bytes, so the
// server's reader thread and the admin request fuzzer (tests/fuzz/admin_request_fuzzer.cc) run
// the same code.
//
// What is accepted: `METHOD SP origin-form SP HTTP/1.0|HTTP/1.1`, then `name: value` lines, then
// an empty line; lines end with CRLF (a bare LF is tolerated). A body is framed by
// Content-Length only: Transfer-Encoding in a request is refused (411), as is a head larger than
// the limit (431). Every connection is closed after its response (no keep-alive), so nothing
// after the body is read.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kproxy::admin {

/// A parsed request head. `target` is raw (percent-encoded, with the query).
struct RequestHead {
  std::string method;
  std::string target;
  std::string version;                                       ///< "HTTP/1.0" or "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;  ///< names lower-cased, in order
  size_t head_bytes = 0;                                     ///< bytes of the head, empty line included
  size_t content_length = 0;                                 ///< 0 without a Content-Length
  bool expect_continue = false;                              ///< `Expect: 100-continue`
};

struct HeadParse {
  enum class Status { incomplete, complete, refused };
  Status status = Status::incomplete;
  RequestHead head;        ///< when complete
  int refusal_status = 0;  ///< when refused: 400, 411 or 431
  std::string refusal;     ///< when refused: why, for the client and the log
};

/// Parses the head at the start of `received` (which may hold body bytes after it). Incomplete
/// while no empty line ended it within `max_head_bytes`; refused once it cannot be a request kproxy
/// serves.
HeadParse parse_request_head(std::string_view received, size_t max_head_bytes);

/// The reason phrase of `status` ("OK", "Not Found", ...; "Status" for one kproxy never sends).
std::string_view reason_phrase(int status);

/// Status line and headers of a response, up to and including the empty line. `content_length`
/// < 0 means a chunked body. Always `Connection: close` and `Cache-Control: no-store`; a 401 says
/// `WWW-Authenticate: Bearer`; a non-empty `allow` is sent as the `Allow` header (405).
std::string response_head(int status, std::string_view content_type, long long content_length, std::string_view allow = {});

/// One chunk of a chunked body (an empty `data` is the last chunk).
std::string chunk(std::string_view data);

}  // namespace kproxy::admin
