// Fuzz target: net::ProxyHeaderReader (issue #33), the PROXY protocol v2 header an SNI or
// load-balanced listener reads before anything else.
//
// Input: [piece length] then the stream. Fed in pieces of that length (0: at once) and at once to
// a second reader: both must end in the same state with the same addresses, authority and rest;
// a refusal always has a reason and a label; rest() is a suffix of the stream.
#include <cstdint>
#include <cstring>
#include <string>

#include "proxy/net/proxy_header.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;
using net::ProxyHeaderReader;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  size_t piece = data[0];
  codec::Bytes stream(data + 1, size - 1);
  ProxyHeaderReader pieces, whole;
  if (piece == 0) {
    pieces.feed(stream);
  } else {
    for (size_t at = 0; at < stream.size() && pieces.state() == ProxyHeaderReader::State::kNeedMore; at += piece)
      pieces.feed(stream.subspan(at, std::min(piece, stream.size() - at)));
  }
  whole.feed(stream);
  fuzz::check(pieces.state() == whole.state(), "state differs by piece size");
  if (whole.state() == ProxyHeaderReader::State::kRefused) {
    fuzz::check(!whole.reason().empty() && std::strlen(whole.refusal_label()) > 0, "a refusal without a reason");
    fuzz::check(std::string(pieces.refusal_label()) == whole.refusal_label(), "refusal label differs by piece size");
  }
  if (whole.state() == ProxyHeaderReader::State::kDone) {
    fuzz::check(pieces.header().source == whole.header().source && pieces.header().authority == whole.header().authority,
                "header differs by piece size");
    codec::Bytes rest = whole.rest();
    fuzz::check(rest.size() <= stream.size() && std::memcmp(rest.data(), stream.data() + (stream.size() - rest.size()), rest.size()) == 0,
                "rest() is not the end of the stream");
  }
  return 0;
}
