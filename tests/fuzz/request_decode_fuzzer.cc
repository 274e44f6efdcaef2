// Fuzz target: request header + body decode for any API key and version.
//
// Input: [key selector][version selector] then the request after its api key and version
// (correlation id, client id, header tags, body). The target builds the frame the proxy would
// see, parses the header (checking the chosen key/version come back and the header re-encodes
// to its own bytes) and decodes the body; where the body decodes, the round-trip property of
// fuzz_common.h must hold.
#include <cstdint>
#include <string>
#include <vector>

#include "codec/generated/api_keys.h"
#include "codec/message.h"
#include "codec/request_header.h"
#include "tests/fuzz/api_selector.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  fuzz::ApiChoice api = fuzz::choose_api(data[0], data[1], /*request=*/true);
  if (!codec::request_versions(api.api_key).contains(api.version)) return 0;  // removed API
  std::vector<uint8_t> frame;
  codec::Writer w(frame);
  w.int16(api.api_key);
  w.int16(api.version);
  frame.insert(frame.end(), data + 2, data + size);

  codec::RequestHeader h;
  std::string error;
  if (!codec::read_request_header(codec::Bytes(frame.data(), frame.size()), h, &error)) return 0;
  fuzz::check(h.api_key == api.api_key && h.api_version == api.version, "request header: key/version not read back");
  fuzz::check(h.header_version == codec::request_header_version(api.api_key, api.version),
              "request header: header version " + std::to_string(h.header_version) + " differs from the table");
  fuzz::check(h.size <= frame.size(), "request header: size beyond the frame");

  // The header re-encodes to exactly the bytes it was read from (known header versions).
  std::vector<uint8_t> hbytes;
  codec::Writer hw(hbytes);
  codec::write_request_header(hw, h);
  fuzz::check(hbytes.size() == codec::request_header_size(h), "request header: request_header_size() != bytes written");
  codec::RequestHeader h2;
  fuzz::check(codec::read_request_header(codec::Bytes(hbytes.data(), hbytes.size()), h2, &error),
              "request header: own encoding does not parse: " + error);
  std::vector<uint8_t> hbytes2;
  codec::Writer hw2(hbytes2);
  codec::write_request_header(hw2, h2);
  fuzz::check(hbytes == hbytes2 && h2.size == hbytes.size(),
              "request header: re-encoding differs: " + fuzz::hex(hbytes) + " vs " + fuzz::hex(hbytes2));

  auto msg = codec::make_request(api.api_key);
  if (!msg) return 0;
  codec::Reader r(codec::Bytes(frame.data() + h.size, frame.size() - h.size));
  msg->read(r, api.version);
  if (!r.ok()) return 0;
  fuzz::check(r.offset() <= frame.size() - h.size, "request body: reader offset beyond the body");
  fuzz::check_round_trip(*msg, api.version, [&] { return codec::make_request(api.api_key); });
  // What fault-rule matching does with a decoded request.
  msg->for_each_entity(api.version, [](codec::EntityKind, std::string_view, int64_t) {});
  (void)msg->unsupported_field(api.version);
  return 0;
}
