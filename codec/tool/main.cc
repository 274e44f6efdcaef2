// kproxy-codec: kproxy's Kafka codec on the command line, one frame per line.
//
// Used by the differential test against Kafka's Java serializers (tests/differential/) and by
// people looking at a captured frame. Every input line gets exactly one output line, so a batch
// of frames can be piped through one process; a bad line is reported on its own line and the
// run goes on (exit status 0). Only a usage error exits non-zero.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "codec/tool/frame_line.h"
#include "codec/tool/subcommands.h"

namespace {

constexpr const char* kUsage = R"(usage: kproxy-codec <command> [args]

Reads Kafka frames from stdin, one per line:

  request|response <api_key> <version> <hex>

<hex> is the frame after its 4-byte size prefix: header and body. Blank lines and lines
starting with '#' are skipped; every other line gets exactly one line of output.

commands:
  decode      prints each frame as one JSON object:
                {"api": "Metadata", "api_key": 3, "direction": "response", "version": 12,
                 "header": {...}, "body": {every field by Kafka's name}}
              `records` fields appear as their byte count. A frame that does not decode
              prints {"error": "<message> v<N>: field <Name> at offset <K>: <reason>"}, the
              offset counting from the start of the hex. Responses use the generated response
              header version (ApiVersions: always v0); an ApiVersions response body that does
              not decode at its version but does at v0 (a broker's UNSUPPORTED_VERSION answer)
              is decoded as v0 ("decoded_as_v0": true), as Kafka's clients and kproxy do.
  roundtrip   decodes each frame and encodes it again at the same version; prints the hex of
              the new frame (header + body), or "error <reason>". A faithful codec prints its
              input back for every canonical frame; unknown tagged fields are kept.
  random <request|response> <api_key> <version> <seed> [count]
              prints `count` (default 1) random frames of that message in the input format,
              using kproxy's generated random instances (for the reverse differential test).
  versions    prints every "request|response <api_key> <version>" the codec knows.
  --help      this text.

Exit status: 0 when the input was read to the end (even if some lines failed), 2 on a usage
error.
)";

int usage_error(const std::string& what) {
  std::fprintf(stderr, "kproxy-codec: %s\n(kproxy-codec --help explains the commands)\n", what.c_str());
  return 2;
}

template <class PerLine>
int for_each_line(PerLine&& per_line) {
  std::ios::sync_with_stdio(false);
  std::string line, out;
  while (std::getline(std::cin, line)) {
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    out.clear();
    per_line(line, out);
    out.push_back('\n');
    std::cout.write(out.data(), static_cast<std::streamsize>(out.size()));
  }
  std::cout.flush();
  return 0;
}

int run_decode() {
  using namespace kproxy::codec::tool;
  return for_each_line([](const std::string& text, std::string& out) {
    std::string error;
    auto line = parse_frame_line(text, &error);
    nlohmann::json j = line ? decode_frame(*line) : nlohmann::json{{"error", error}};
    out = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  });
}

int run_roundtrip() {
  using namespace kproxy::codec::tool;
  std::vector<uint8_t> bytes;
  return for_each_line([&](const std::string& text, std::string& out) {
    std::string error;
    auto line = parse_frame_line(text, &error);
    if (line && roundtrip_frame(*line, bytes, &error)) {
      out = to_hex(bytes);
    } else {
      out = "error " + error;
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage_error("missing command");
  std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "decode" || cmd == "roundtrip") {
    if (argc != 2) return usage_error(cmd + " takes no arguments (frames come on stdin)");
    return cmd == "decode" ? run_decode() : run_roundtrip();
  }
  if (cmd == "random") return kproxy::codec::tool::run_random(argc - 2, argv + 2);
  if (cmd == "versions") {
    if (argc != 2) return usage_error("versions takes no arguments");
    return kproxy::codec::tool::run_versions();
  }
  return usage_error("unknown command '" + cmd + "'");
}
