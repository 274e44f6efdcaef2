// Config keys: every key of kproxy's YAML config, declared once (issue #47).
//
// config_keys() is one table, in the order config/README.md lists the keys. Each row (KeySpec)
// names a key by its full path ("limits.max_connections", "listeners[].tls.cert": `[]` marks an
// entry of a list), says what kind of value it takes and within which bounds, the default and a
// one-line meaning as the README shows them, and, for a key the loader can read on its own, where
// in Config the value goes. From it derive:
//
//   - the keys each mapping of the file may hold (config_loader.cc's unknown-key check): the
//     children of a path are the next components of the rows below it, in table order, so a
//     mapping such as `admin:` or `tracing.batch:` is known through its keys' rows;
//   - reading and bounds-checking every row with a `target` (config_loader.cc read_keys), and the
//     bounds and error texts of the rows whose reader is bespoke;
//   - the key table of config/README.md (config_keys_markdown()); the unit test
//     "config/README.md's key table is the one config_keys() declares" fails when they differ,
//     and scripts/config-keys-table rewrites the README from the table.
//
// A row with kind KeyKind::kBespoke (or without a target) is read by its own code in
// config_loader.cc: its value is structured or depends on other keys; the comment above the
// table in config_keys.cc says why for each.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"

namespace kproxy::config {

/// What a key's value is, and so how the loader parses and bounds-checks it.
enum class KeyKind : uint8_t {
  kFlag,      ///< true/false (also yes/no, on/off)
  kCount,     ///< a whole number in [min, max]
  kByteSize,  ///< bytes, "64KiB", "100MiB" (config_loader.h parse_byte_size); never 0; in [min, max]
  kDuration,  ///< "500ms", "30s", "2m" or seconds (parse_duration); in [min, max] milliseconds
  kString,    ///< any text; min 1: not empty
  kHostPort,  ///< a listening "host:port" (config/host_port.h); port 0: the kernel picks
  kChoice,    ///< one of the comma-separated `choices`
  kBespoke,   ///< anything else: a list, a mapping, or a value its own code reads
};

/// Where a row's value goes in a Config being loaded: a function returning a reference to the
/// member (a captureless lambda), or for kChoice a setter given the index of the choice taken.
/// std::monostate: the row's reader is bespoke.
using KeyTarget =
    std::variant<std::monostate, bool& (*)(Config&), uint32_t& (*)(Config&), size_t& (*)(Config&), std::chrono::milliseconds& (*)(Config&),
                 std::string& (*)(Config&), std::optional<HostPort>& (*)(Config&), void (*)(Config&, size_t)>;

inline constexpr uint64_t kNoMaximum = std::numeric_limits<uint64_t>::max();

/// One config key.
struct KeySpec {
  std::string_view key;  ///< full path: "metrics.frames", "listeners[].sni.unknown"
  KeyKind kind = KeyKind::kBespoke;
  uint64_t min = 0;           ///< kCount, kByteSize, kDuration (milliseconds); kString: 1 = not empty
  uint64_t max = kNoMaximum;  ///< kCount, kByteSize, kDuration (milliseconds)
  std::string_view choices;   ///< kChoice: "text, json"
  /// The error for a value out of bounds (or not among the choices), after "key: ". kCount and
  /// kChoice prefix it with "'value' is not "; empty: "a number from MIN to MAX" (kCount) or
  /// "one of CHOICES" (kChoice).
  std::string_view bad;
  std::string_view default_text;  ///< the README's default column (Markdown)
  std::string_view doc;           ///< the README's meaning column (Markdown, one line)
  KeyTarget target;

  /// The key's path minus its last component ("limits" for "limits.max_connections", "" at the top).
  std::string_view parent() const;
  /// The last component, as written in the file ("max_connections"; "listeners" for "listeners[]").
  std::string_view name() const;
};

/// Every key, in config/README.md's order.
std::span<const KeySpec> config_keys();

/// The row of `key`; nullptr when no row has that path.
const KeySpec* find_key(std::string_view key);

/// The keys a mapping at `path` may hold, in table order, e.g. {"listen", "token_file",
/// "token_env"} for "admin" and {"listeners", "admin", ...} for "" (the top level).
std::vector<std::string_view> child_keys(std::string_view path);

/// The key table of config/README.md: its header line, separator and one row per key, each line
/// ending in '\n'.
std::string config_keys_markdown();

/// `markdown` (config/README.md's text) with its key table, the lines from "| key | default |
/// meaning |" to the last table line after it, replaced by config_keys_markdown(); nullopt when
/// it has no such table.
std::optional<std::string> with_key_table(std::string_view markdown);

}  // namespace kproxy::config
