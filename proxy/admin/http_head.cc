#include "proxy/admin/http_head.h"

#include <cctype>
#include <cstdint>
#include <limits>

namespace kproxy::admin {
namespace {

/// RFC 9110 section 5.6.2 token characters (method and header names).
bool is_tchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~': return true;
    default: return false;
  }
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!is_tchar(c)) return false;
  }
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

HeadParse refuse(int status, std::string why) {
  HeadParse p;
  p.status = HeadParse::Status::refused;
  p.refusal_status = status;
  p.refusal = std::move(why);
  return p;
}

}  // namespace

HeadParse parse_request_head(std::string_view received, size_t max_head_bytes) {
  // Find the empty line that ends the head (CRLF CRLF, or LF LF from a lenient client).
  size_t end = std::string_view::npos, body_start = 0;
  for (size_t i = 0; i < received.size(); ++i) {
    if (received[i] != '\n') continue;
    if (i + 1 < received.size() && received[i + 1] == '\n') {
      end = i + 1;
      body_start = i + 2;
      break;
    }
    if (i + 2 < received.size() && received[i + 1] == '\r' && received[i + 2] == '\n') {
      end = i + 1;
      body_start = i + 3;
      break;
    }
  }
  if (end == std::string_view::npos || body_start > max_head_bytes) {
    if (received.size() > max_head_bytes) return refuse(431, "request head over " + std::to_string(max_head_bytes) + " bytes");
    return {};
  }

  HeadParse parse;
  RequestHead& head = parse.head;
  head.head_bytes = body_start;
  std::string_view lines = received.substr(0, end);
  bool first = true, have_length = false;
  while (!lines.empty()) {
    size_t nl = lines.find('\n');
    std::string_view line = lines.substr(0, nl);
    lines.remove_prefix(nl == std::string_view::npos ? lines.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    for (unsigned char c : line) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) return refuse(400, "the request head has a control character or NUL");
    }
    if (first) {
      first = false;
      size_t sp1 = line.find(' ');
      size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
      if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
        return refuse(400, "malformed request line (want METHOD /path HTTP/1.1)");
      }
      head.method = std::string(line.substr(0, sp1));
      head.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
      head.version = std::string(line.substr(sp2 + 1));
      if (!is_token(head.method)) return refuse(400, "malformed request method");
      if (head.target.empty() || head.target.front() != '/') return refuse(400, "the request target must be a path starting with '/'");
      if (head.version != "HTTP/1.1" && head.version != "HTTP/1.0") {
        return refuse(400, "unsupported HTTP version (want HTTP/1.0 or HTTP/1.1)");
      }
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') return refuse(400, "folded header lines are not accepted");
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) return refuse(400, "malformed header line");
    std::string name = lower(line.substr(0, colon));
    std::string_view value = trim(line.substr(colon + 1));
    if (name == "content-length") {
      if (value.empty()) return refuse(400, "malformed Content-Length");
      size_t length = 0;
      for (char c : value) {
        if (c < '0' || c > '9') return refuse(400, "malformed Content-Length");
        const size_t digit = static_cast<size_t>(c - '0');
        // Saturates: any length past what size_t holds is over every body cap anyway.
        length = length > (std::numeric_limits<size_t>::max() - digit) / 10 ? std::numeric_limits<size_t>::max() : length * 10 + digit;
      }
      if (have_length && length != head.content_length) return refuse(400, "conflicting Content-Length headers");
      have_length = true;
      head.content_length = length;
    } else if (name == "transfer-encoding") {
      // RFC 9112 section 6.1: a server may refuse a request body it cannot frame with 411.
      return refuse(411, "Transfer-Encoding request bodies are not accepted; send Content-Length");
    } else if (name == "expect") {
      if (lower(value) != "100-continue") return refuse(400, "unsupported Expect header");
      head.expect_continue = true;
    }
    head.headers.emplace_back(std::move(name), std::string(value));
  }
  parse.status = HeadParse::Status::complete;
  return parse;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

std::string response_head(int status, std::string_view content_type, long long content_length, std::string_view allow) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason_phrase(status)) + "\r\n";
  out += "Content-Type: ";
  out += content_type;
  out += "\r\n";
  if (content_length < 0) {
    out += "Transfer-Encoding: chunked\r\n";
  } else {
    out += "Content-Length: " + std::to_string(content_length) + "\r\n";
  }
  out += "Cache-Control: no-store\r\nConnection: close\r\n";
  if (status == 401) out += "WWW-Authenticate: Bearer\r\n";
  if (!allow.empty()) {
    out += "Allow: ";
    out += allow;
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

std::string chunk(std::string_view data) {
  static const char* kHex = "0123456789abcdef";
  std::string size;
  size_t n = data.size();
  do {
    size.insert(size.begin(), kHex[n & 15]);
    n >>= 4;
  } while (n);
  std::string out = size + "\r\n";
  out += data;
  out += "\r\n";
  return out;
}

}  // namespace kproxy::admin
