#include "proxy/tls/client_hello.h"

#include <algorithm>

#include "config/sni_config.h"

namespace kproxy::tls {

namespace {

constexpr uint8_t kHandshakeRecord = 22;  // RFC 8446 section 5.1, ContentType handshake
constexpr uint8_t kClientHello = 1;       // HandshakeType client_hello
constexpr size_t kRecordHeader = 5;
constexpr size_t kMaxRecordPayload = 1 << 14;  // TLSPlaintext.length must not exceed 2^14
constexpr size_t kHandshakeHeader = 4;
constexpr uint16_t kServerNameExtension = 0;  // RFC 6066 section 3
constexpr uint8_t kHostName = 0;

/// A bounds-checked reader over a byte span: every read fails once past the end.
class Cursor {
 public:
  explicit Cursor(codec::Bytes b) : b_(b) {}
  bool u8(uint8_t& v) {
    if (left() < 1) return false;
    v = b_[pos_++];
    return true;
  }
  bool u16(uint16_t& v) {
    if (left() < 2) return false;
    v = static_cast<uint16_t>(b_[pos_] << 8 | b_[pos_ + 1]);
    pos_ += 2;
    return true;
  }
  bool bytes(size_t n, codec::Bytes& out) {
    if (left() < n) return false;
    out = b_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  bool skip(size_t n) {
    codec::Bytes ignored;
    return bytes(n, ignored);
  }
  size_t left() const { return b_.size() - pos_; }

 private:
  codec::Bytes b_;
  size_t pos_ = 0;
};

std::string parse_server_name(codec::Bytes data, ClientHelloInfo& out) {
  Cursor c(data);
  uint16_t list_length = 0;
  if (!c.u16(list_length) || list_length != c.left() || list_length == 0) return "server_name: bad list length";
  while (c.left() > 0) {
    uint8_t type = 0;
    uint16_t length = 0;
    codec::Bytes name;
    if (!c.u8(type) || !c.u16(length) || !c.bytes(length, name)) return "server_name: truncated entry";
    if (type != kHostName) continue;  // other name types are not defined; skipped
    if (out.has_server_name) return "server_name: more than one host_name";
    out.has_server_name = true;
    out.raw_server_name.assign(reinterpret_cast<const char*>(name.data()), std::min(name.size(), kMaxRawServerName));
    if (name.size() <= kMaxRawServerName) out.server_name = normalize_server_name(out.raw_server_name);
  }
  return "";
}

}  // namespace

std::string parse_client_hello(codec::Bytes body, ClientHelloInfo& out) {
  // RFC 8446 section 4.1.2 (and RFC 5246 section 7.4.1.2 for TLS 1.2, where extensions may be absent).
  Cursor c(body);
  uint16_t legacy_version = 0;
  uint8_t session_id_length = 0, compression_length = 0;
  uint16_t suites_length = 0;
  if (!c.u16(legacy_version) || !c.skip(32)) return "ClientHello: truncated before the session id";
  if ((legacy_version >> 8) != 3) return "ClientHello: version " + std::to_string(legacy_version) + " is not TLS";
  if (!c.u8(session_id_length) || session_id_length > 32 || !c.skip(session_id_length)) return "ClientHello: bad session id";
  if (!c.u16(suites_length) || suites_length < 2 || suites_length % 2 != 0 || !c.skip(suites_length))
    return "ClientHello: bad cipher suites";
  if (!c.u8(compression_length) || compression_length < 1 || !c.skip(compression_length)) return "ClientHello: bad compression methods";
  if (c.left() == 0) return "";  // no extensions at all: no SNI
  uint16_t extensions_length = 0;
  if (!c.u16(extensions_length) || extensions_length != c.left()) return "ClientHello: extensions length does not match the message";
  bool seen_server_name = false;
  while (c.left() > 0) {
    uint16_t type = 0, length = 0;
    codec::Bytes data;
    if (!c.u16(type) || !c.u16(length) || !c.bytes(length, data)) return "ClientHello: truncated extension";
    if (type != kServerNameExtension) continue;
    if (seen_server_name) return "ClientHello: two server_name extensions";
    seen_server_name = true;
    if (std::string e = parse_server_name(data, out); !e.empty()) return "ClientHello: " + e;
  }
  return "";
}

std::optional<std::string> normalize_server_name(std::string_view raw) {
  if (!raw.empty() && raw.back() == '.') raw.remove_suffix(1);
  if (raw.empty() || raw.size() > 253) return std::nullopt;
  std::string out;
  out.reserve(raw.size());
  size_t label = 0;
  for (char ch : raw) {
    if (ch == '.') {
      if (label == 0) return std::nullopt;  // empty label: "a..b", ".a"
      label = 0;
    } else if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_') {
      if (++label > 63) return std::nullopt;
    } else if (ch >= 'A' && ch <= 'Z') {
      ch = static_cast<char>(ch - 'A' + 'a');
      if (++label > 63) return std::nullopt;
    } else {
      return std::nullopt;
    }
    out += ch;
  }
  // One trailing dot (the root) was taken off above; another leaves an empty last label
  // ("a.b.."), which normalising again would change: refused like "a..b" (found by fuzz_client_hello).
  if (label == 0) return std::nullopt;
  return out;
}

bool is_ip_literal(std::string_view name) { return config::is_address_literal(name); }

const char* ClientHelloReader::state_name(State state) {
  switch (state) {
    case State::kNeedMore: return "need_more";
    case State::kDone: return "done";
    case State::kNotTls: return "not_tls";
    case State::kTooLarge: return "too_large";
    case State::kMalformed: return "malformed";
  }
  return "?";
}

ClientHelloReader::State ClientHelloReader::feed(codec::Bytes data) {
  if (state_ != State::kNeedMore || data.empty()) return state_;
  size_t room = max_bytes_ > buffered_.size() ? max_bytes_ - buffered_.size() : 0;
  buffered_.insert(buffered_.end(), data.begin(), data.begin() + static_cast<std::ptrdiff_t>(std::min(room, data.size())));
  state_ = parse();
  if (state_ == State::kNeedMore && data.size() > room) {
    state_ = State::kTooLarge;
    error_ = "no whole ClientHello within the first " + std::to_string(max_bytes_) + " bytes";
  }
  return state_;
}

ClientHelloReader::State ClientHelloReader::parse() {
  // Whole records not yet looked at: append their payloads to the handshake message, until it is
  // whole (what follows the hello is the TLS session's to judge, however it arrived).
  auto message_whole = [this] {
    return message_.size() >= kHandshakeHeader &&
           message_.size() >=
               kHandshakeHeader + (static_cast<size_t>(message_[1]) << 16 | static_cast<size_t>(message_[2]) << 8 | message_[3]);
  };
  while (buffered_.size() - records_end_ >= kRecordHeader && !message_whole()) {
    const uint8_t* r = buffered_.data() + records_end_;
    if (r[0] != kHandshakeRecord) {
      error_ = records_end_ == 0 ? "the first byte is " + std::to_string(r[0]) + ", not a TLS handshake record (22)"
                                 : "a record of type " + std::to_string(r[0]) + " before the ClientHello was whole";
      return records_end_ == 0 ? State::kNotTls : State::kMalformed;
    }
    if (r[1] != 3) {
      error_ = "record version " + std::to_string(r[1]) + "." + std::to_string(r[2]) + " is not TLS";
      return records_end_ == 0 ? State::kNotTls : State::kMalformed;
    }
    size_t length = static_cast<size_t>(r[3]) << 8 | r[4];
    if (length == 0 || length > kMaxRecordPayload) {
      error_ = "a handshake record of " + std::to_string(length) + " bytes";
      return State::kMalformed;
    }
    if (buffered_.size() - records_end_ < kRecordHeader + length) break;  // the record is not whole yet
    message_.insert(message_.end(), r + kRecordHeader, r + kRecordHeader + length);
    records_end_ += kRecordHeader + length;
  }
  // The first byte alone already tells a plaintext client apart.
  if (records_end_ == 0 && !buffered_.empty() && buffered_[0] != kHandshakeRecord) {
    error_ = "the first byte is " + std::to_string(buffered_[0]) + ", not a TLS handshake record (22)";
    return State::kNotTls;
  }
  if (message_.size() < kHandshakeHeader) return State::kNeedMore;
  if (message_[0] != kClientHello) {
    error_ = "the first handshake message is of type " + std::to_string(message_[0]) + ", not a ClientHello";
    return State::kMalformed;
  }
  size_t length = static_cast<size_t>(message_[1]) << 16 | static_cast<size_t>(message_[2]) << 8 | message_[3];
  if (message_.size() < kHandshakeHeader + length) return State::kNeedMore;
  codec::Bytes body(message_.data() + kHandshakeHeader, length);
  ClientHelloInfo hello;  // kept only when the whole hello parsed: a name is never half-read
  if (std::string e = parse_client_hello(body, hello); !e.empty()) {
    error_ = e;
    return State::kMalformed;
  }
  hello_ = std::move(hello);
  return State::kDone;
}

}  // namespace kproxy::tls
