// Shell-style globs, the one matcher of every name selector in kproxy: fault rules' match
// (proxy/chaos/fault_rule.h) and the ApiVersions policy's scopes (proxy/policy/api_versions_policy.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kproxy::util {

/// Shell-style glob: `*` any run, `?` one character, `[abc]`/`[a-z]`/`[!x]` classes, `\` escapes.
bool glob_match(std::string_view pattern, std::string_view text);
/// "" when `pattern` is a valid glob, else why not (an unclosed `[`, a trailing `\`, longer
/// than kMaxGlobLength).
std::string glob_error(std::string_view pattern);
/// Globs are matched per request against peer-supplied text (a client id may be 32 KiB), in time
/// up to pattern length x text length when `*` backtracks: the length is capped. The longest name
/// matched is a topic's (249 characters, Kafka's Topic.MAX_NAME_LENGTH).
inline constexpr size_t kMaxGlobLength = 256;

}  // namespace kproxy::util
