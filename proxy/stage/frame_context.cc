#include "proxy/stage/frame_context.h"

#include "codec/api_versions.h"
#include "codec/frame_reader.h"
#include "codec/generated/api_keys.h"
#include "codec/generated/messages/api_versions.h"
#include "codec/response_header.h"
#include "codec/writer.h"

namespace kproxy::stage {

std::shared_ptr<codec::Message> RequestContext::message() const {
  if (decoded_) return message_;
  decoded_ = true;
  if (header_.header_version < 0) {
    decode_error_ = "version unknown to kproxy";
    decode_failure_ = codec::api_name(header_.api_key) ? DecodeFailure::kUnknownVersion : DecodeFailure::kUnknownApi;
    return nullptr;
  }
  auto m = codec::make_request(header_.api_key);
  if (!m) {
    decode_error_ = "api key unknown to kproxy";
    decode_failure_ = DecodeFailure::kUnknownApi;
    return nullptr;
  }
  codec::Bytes body = frame_.subspan(codec::kFrameSizePrefix + header_.size);
  codec::Reader r(body);
  m->read(r, header_.api_version);
  if (!r.ok()) {
    decode_error_ = r.error();
    decode_failure_ = DecodeFailure::kMalformed;
    return nullptr;
  }
  message_ = std::shared_ptr<codec::Message>(std::move(m));
  return message_;
}

std::shared_ptr<codec::Message> ResponseContext::message() const {
  if (decoded_) return message_;
  decoded_ = true;
  codec::ResponseHeader h;
  codec::Bytes after_prefix = frame_.subspan(codec::kFrameSizePrefix);
  if (header_version_ < 0) {
    decode_error_ = "version unknown to kproxy";
    decode_failure_ = codec::api_name(api_key_) ? DecodeFailure::kUnknownVersion : DecodeFailure::kUnknownApi;
    return nullptr;
  }
  if (!codec::read_response_header(after_prefix, header_version_, h, &decode_error_)) {
    decode_failure_ = DecodeFailure::kMalformed;
    return nullptr;
  }
  codec::Bytes body = after_prefix.subspan(h.size);
  if (api_key_ == static_cast<int16_t>(codec::ApiKey::kApiVersions)) {
    auto av = std::make_shared<codec::ApiVersionsResponse>();
    int16_t v = codec::decode_api_versions_response(body, api_version_, *av, &decode_error_);
    if (v < 0) {
      decode_failure_ = DecodeFailure::kMalformed;
      return nullptr;
    }
    body_version_ = v;
    message_ = av;
    return message_;
  }
  auto m = codec::make_response(api_key_);
  if (!m) {
    decode_error_ = "api key unknown to kproxy";
    decode_failure_ = DecodeFailure::kUnknownApi;
    return nullptr;
  }
  codec::Reader r(body);
  m->read(r, api_version_);
  if (!r.ok()) {
    decode_error_ = r.error();
    decode_failure_ = DecodeFailure::kMalformed;
    return nullptr;
  }
  body_version_ = api_version_;
  message_ = std::shared_ptr<codec::Message>(std::move(m));
  return message_;
}

const codec::ResponseScan* ResponseContext::scan() const {
  if (scanned_) return own_scan_ ? &*own_scan_ : nullptr;
  scanned_ = true;
  codec::ResponseHeader h;
  codec::Bytes after_prefix = frame_.subspan(codec::kFrameSizePrefix);
  if (header_version_ < 0 || !codec::read_response_header(after_prefix, header_version_, h, nullptr)) return nullptr;
  if (!codec::scan_response(api_key_, api_version_, after_prefix.subspan(h.size), own_scan_.emplace())) {
    own_scan_.reset();
    return nullptr;
  }
  return &*own_scan_;
}

void ResponseContext::replace_frame(std::vector<uint8_t> frame, StageId by) {
  replaced_ = std::move(frame);
  frame_ = codec::Bytes(replaced_.data(), replaced_.size());
  changed_by_ |= bit(by);
  dirty_ = false;
  decoded_ = false;
  message_.reset();
  decode_error_.clear();
  decode_failure_ = DecodeFailure::kNone;
  scanned_ = false;
  own_scan_.reset();
}

std::vector<uint8_t> ResponseContext::encode() const {
  if (!dirty_ || !message_) return std::vector<uint8_t>(frame_.begin(), frame_.end());
  codec::ResponseHeader h;
  codec::Bytes after_prefix = frame_.subspan(codec::kFrameSizePrefix);
  codec::read_response_header(after_prefix, header_version_, h, nullptr);
  size_t body_size = message_->size(body_version_);
  std::vector<uint8_t> out;
  out.reserve(codec::kFrameSizePrefix + h.size + body_size);
  codec::Writer w(out);
  w.int32(static_cast<int32_t>(h.size + body_size));  // patched size prefix
  w.raw(after_prefix.subspan(0, h.size));             // the header as the broker sent it
  message_->write(w, body_version_);
  return out;
}

}  // namespace kproxy::stage
