#include "proxy/net/proxy_header.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace kproxy::net {

namespace {

// The v2 signature: \r\n\r\n\0\r\nQUIT\n (proxy-protocol.txt section 2.2).
constexpr uint8_t kSignature[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
constexpr size_t kPreamble = 16;
constexpr uint8_t kCommandLocal = 0x0;
constexpr uint8_t kCommandProxy = 0x1;
constexpr uint8_t kFamilyUnspec = 0x0;
constexpr uint8_t kFamilyInet = 0x1;
constexpr uint8_t kFamilyInet6 = 0x2;
constexpr uint8_t kFamilyUnix = 0x3;
constexpr uint8_t kTlvAuthority = 0x02;
constexpr size_t kMaxAuthority = 255;

std::string inet_address(int family, const uint8_t* addr, const uint8_t* port) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, addr, text, sizeof(text));
  unsigned p = static_cast<unsigned>(port[0]) << 8 | port[1];
  return family == AF_INET6 ? "[" + std::string(text) + "]:" + std::to_string(p) : std::string(text) + ":" + std::to_string(p);
}

}  // namespace

codec::Bytes ProxyHeaderReader::rest() const {
  if (state_ != State::kDone) return {};
  return codec::Bytes(buffered_.data() + header_size_, buffered_.size() - header_size_);
}

ProxyHeaderReader::State ProxyHeaderReader::refuse(const char* label, std::string reason) {
  refusal_label_ = label;
  reason_ = std::move(reason);
  return State::kRefused;
}

ProxyHeaderReader::State ProxyHeaderReader::feed(codec::Bytes data) {
  if (state_ != State::kNeedMore || data.empty()) return state_;
  buffered_.insert(buffered_.end(), data.begin(), data.end());
  state_ = parse();
  return state_;
}

ProxyHeaderReader::State ProxyHeaderReader::parse() {
  // Refuse as soon as the bytes so far cannot begin a v2 header: a direct client is told at once.
  size_t known = std::min(buffered_.size(), sizeof(kSignature));
  if (std::memcmp(buffered_.data(), kSignature, known) != 0) {
    static constexpr char kV1[] = "PROXY ";
    size_t v1 = std::min(buffered_.size(), sizeof(kV1) - 1);
    if (std::memcmp(buffered_.data(), kV1, v1) == 0) {
      if (v1 < sizeof(kV1) - 1) return State::kNeedMore;
      return refuse("version_1", "a PROXY protocol version 1 (text) header: this listener takes version 2 (send-proxy-v2)");
    }
    return refuse("no_signature",
                  "no PROXY protocol v2 signature in the first bytes (a client connecting directly, not through the load balancer?)");
  }
  if (buffered_.size() < kPreamble) return State::kNeedMore;
  const uint8_t* p = buffered_.data();
  uint8_t version = p[12] >> 4, command = p[12] & 0x0F;
  uint8_t family = p[13] >> 4, transport = p[13] & 0x0F;
  size_t length = static_cast<size_t>(p[14]) << 8 | p[15];
  if (version != 2) return refuse("bad_version", "PROXY protocol version " + std::to_string(version) + " (only 2 is defined)");
  if (command != kCommandLocal && command != kCommandProxy) return refuse("bad_command", "PROXY command " + std::to_string(command));
  if (kPreamble + length > max_bytes_) {
    return refuse("too_large",
                  "a PROXY header of " + std::to_string(kPreamble + length) + " bytes (at most " + std::to_string(max_bytes_) + ")");
  }
  if (buffered_.size() < kPreamble + length) return State::kNeedMore;
  header_size_ = kPreamble + length;
  header_ = {};
  header_.local = command == kCommandLocal;
  const uint8_t* body = p + kPreamble;
  size_t address_size = 0;
  if (!header_.local) {
    if (transport != 0x1 && family != kFamilyUnspec) return refuse("bad_family", "a PROXY header for a transport other than TCP");
    switch (family) {
      case kFamilyInet:
        address_size = 12;
        if (length < address_size) return refuse("malformed", "a PROXY header too short for its IPv4 addresses");
        header_.source = inet_address(AF_INET, body, body + 8);
        header_.destination = inet_address(AF_INET, body + 4, body + 10);
        break;
      case kFamilyInet6:
        address_size = 36;
        if (length < address_size) return refuse("malformed", "a PROXY header too short for its IPv6 addresses");
        header_.source = inet_address(AF_INET6, body, body + 32);
        header_.destination = inet_address(AF_INET6, body + 16, body + 34);
        break;
      case kFamilyUnix: address_size = 216; break;  // addresses of UNIX sockets: not usable as a client address
      case kFamilyUnspec: address_size = 0; break;
      default: return refuse("bad_family", "PROXY address family " + std::to_string(family));
    }
    if (length < address_size) return refuse("malformed", "a PROXY header too short for its addresses");
  }
  // TLVs (section 2.2.7): type, 2-byte length, value; only the authority is read.
  size_t at = header_.local ? length : address_size;  // LOCAL: the body is skipped whole
  while (at < length) {
    if (length - at < 3) return refuse("malformed", "a truncated TLV in the PROXY header");
    uint8_t type = body[at];
    size_t size = static_cast<size_t>(body[at + 1]) << 8 | body[at + 2];
    if (length - at - 3 < size) return refuse("malformed", "a TLV longer than the PROXY header");
    if (type == kTlvAuthority) {
      header_.authority.emplace(reinterpret_cast<const char*>(body + at + 3), std::min(size, kMaxAuthority));
    }
    at += 3 + size;
  }
  return State::kDone;
}

}  // namespace kproxy::net
