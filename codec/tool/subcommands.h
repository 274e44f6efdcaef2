// The kproxy-codec commands that do not map one frame line to one output line.
#pragma once

namespace kproxy::codec::tool {

/// `random <request|response> <api_key> <version> <seed> [count]`, or with no arguments one such
/// spec per stdin line: prints random frames (header + body) in kproxy-codec's line format,
/// from the generated random instances (codec/generated/testing/fill.h). A frame the codec cannot write
/// consistently prints "error <direction> <api_key> <version>: <reason>" instead.
int run_random(int argc, char** argv);

/// `versions`: prints "request|response <api_key> <version>" for every version the codec knows.
int run_versions();

}  // namespace kproxy::codec::tool
