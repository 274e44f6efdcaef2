// Fuzz target: tls::ClientHelloReader (issue #33), the first thing an SNI listener reads
// from a stranger.
//
// Input: [cap selector][piece length] then the stream bytes. The stream is fed in pieces of the
// given length (0: all at once) to a reader with a cap chosen by the selector, and all at once to
// a second reader with the same cap. Both must end in the same state with the same name; a
// reader never holds more than its cap; a name it returns is already normalised; the hello's
// raw name is never longer than kMaxRawServerName.
#include <cstdint>
#include <string>

#include "proxy/tls/client_hello.h"
#include "tests/fuzz/fuzz_common.h"

using namespace kproxy;
using tls::ClientHelloReader;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const size_t kCaps[] = {ClientHelloReader::kDefaultMaxBytes, 64, 517, 4096};
  size_t cap = kCaps[data[0] % 4];
  size_t piece = data[1];
  codec::Bytes stream(data + 2, size - 2);

  ClientHelloReader pieces(cap), whole(cap);
  if (piece == 0) {
    pieces.feed(stream);
  } else {
    for (size_t at = 0; at < stream.size(); at += piece) pieces.feed(stream.subspan(at, std::min(piece, stream.size() - at)));
  }
  whole.feed(stream);
  fuzz::check(pieces.state() == whole.state(), std::string("state differs by piece size: ") +
                                                   ClientHelloReader::state_name(pieces.state()) + " vs " +
                                                   ClientHelloReader::state_name(whole.state()));
  fuzz::check(pieces.server_name() == whole.server_name(), "server name differs by piece size");
  fuzz::check(pieces.bytes().size() <= cap && whole.bytes().size() <= cap, "a reader holds more than its cap");
  fuzz::check(whole.hello().raw_server_name.size() <= tls::kMaxRawServerName, "raw server name over the cap");
  if (const auto& name = whole.server_name()) {
    fuzz::check(whole.state() == ClientHelloReader::State::kDone, "a name before the hello was whole");
    fuzz::check(tls::normalize_server_name(*name) == *name, "a returned name is not normalised: " + *name);
    (void)tls::is_ip_literal(*name);
  }
  return 0;
}
