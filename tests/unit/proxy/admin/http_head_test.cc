#include "proxy/admin/http_head.h"

#include <string>

#include <doctest/doctest.h>

using namespace kproxy::admin;

TEST_CASE("http head: a whole head, headers lower-cased in order, body bytes left after it") {
  const std::string raw = "PUT /faults/x?y=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nX-Two:  v w \r\n\r\nbody";
  HeadParse p = parse_request_head(raw, 1024);
  REQUIRE(p.status == HeadParse::Status::complete);
  CHECK(p.head.method == "PUT");
  CHECK(p.head.target == "/faults/x?y=1");
  CHECK(p.head.version == "HTTP/1.1");
  REQUIRE(p.head.headers.size() == 3);
  CHECK(p.head.headers[2].first == "x-two");
  CHECK(p.head.headers[2].second == "v w");
  CHECK(p.head.content_length == 4);
  CHECK(raw.substr(p.head.head_bytes) == "body");
  // Bare LF line ends are tolerated.
  HeadParse lf = parse_request_head("GET / HTTP/1.0\nHost: a\n\n", 1024);
  CHECK(lf.status == HeadParse::Status::complete);
  CHECK(lf.head.head_bytes == 24);
}

TEST_CASE("http head: incomplete until the empty line, 431 past the limit") {
  CHECK(parse_request_head("", 64).status == HeadParse::Status::incomplete);
  CHECK(parse_request_head("G", 64).status == HeadParse::Status::incomplete);
  CHECK(parse_request_head("GET / HTTP/1.1\r\nHost: a\r\n", 64).status == HeadParse::Status::incomplete);
  HeadParse big = parse_request_head("GET / HTTP/1.1\r\nX: " + std::string(100, 'a'), 64);
  CHECK(big.status == HeadParse::Status::refused);
  CHECK(big.refusal_status == 431);
  // A whole head longer than the limit is refused too, even with its end in the buffer.
  HeadParse whole = parse_request_head("GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n", 64);
  CHECK(whole.refusal_status == 431);
}

TEST_CASE("http head: refusals") {
  auto status = [](const std::string& raw) {
    HeadParse p = parse_request_head(raw, 4096);
    return p.status == HeadParse::Status::refused ? p.refusal_status : 0;
  };
  CHECK(status("GET /\r\n\r\n") == 400);                   // no version
  CHECK(status("GET  / HTTP/1.1\r\n\r\n") == 400);         // two spaces
  CHECK(status("GET http://h/ HTTP/1.1\r\n\r\n") == 400);  // absolute form
  CHECK(status("GET / HTTP/2\r\n\r\n") == 400);
  CHECK(status("G(T / HTTP/1.1\r\n\r\n") == 400);  // not a token
  CHECK(status("GET / HTTP/1.1\r\nNoColon\r\n\r\n") == 400);
  CHECK(status("GET / HTTP/1.1\r\n folded\r\n\r\n") == 400);
  CHECK(status(std::string("GET /a\0b HTTP/1.1\r\n\r\n", 21)) == 400);
  CHECK(status("GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n") == 400);
  CHECK(status("GET / HTTP/1.1\r\nContent-Length: \r\n\r\n") == 400);
  CHECK(status("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n") == 400);
  CHECK(status("GET / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n") == 0);
  CHECK(status("PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == 411);
  CHECK(status("PUT / HTTP/1.1\r\nExpect: something\r\n\r\n") == 400);
  // A Content-Length past size_t saturates (and is then over any body cap), never wraps.
  HeadParse huge = parse_request_head("PUT / HTTP/1.1\r\nContent-Length: 99999999999999999999999999\r\n\r\n", 4096);
  REQUIRE(huge.status == HeadParse::Status::complete);
  CHECK(huge.head.content_length > (size_t{1} << 40));
  HeadParse cont = parse_request_head("PUT / HTTP/1.1\r\nExpect: 100-Continue\r\n\r\n", 4096);
  CHECK(cont.head.expect_continue);
}

TEST_CASE("http head: response heads and chunks") {
  CHECK(response_head(200, "text/plain", 5) ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
  std::string unauthorized = response_head(401, "application/json", 0);
  CHECK(unauthorized.find("WWW-Authenticate: Bearer\r\n") != std::string::npos);
  std::string chunked = response_head(200, "application/x-ndjson", -1);
  CHECK(chunked.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(chunked.find("Content-Length") == std::string::npos);
  CHECK(chunk("hello") == "5\r\nhello\r\n");
  CHECK(chunk(std::string(26, 'x')).rfind("1a\r\n", 0) == 0);
  CHECK(chunk("") == "0\r\n\r\n");
  CHECK(reason_phrase(408) == "Request Timeout");
}

TEST_CASE("response_head: an Allow header only when given") {
  CHECK(kproxy::admin::response_head(405, "application/json", 2, "GET, HEAD").find("\r\nAllow: GET, HEAD\r\n") != std::string::npos);
  CHECK(kproxy::admin::response_head(200, "application/json", 2).find("Allow:") == std::string::npos);
}
