// Loading and validating a Config from YAML.
//
// Every problem is reported with the file, the 1-based line and column (from yaml-cpp's Mark) and
// what is wrong, e.g. "kproxy.yaml:7:15: listeners[0].listen: port must be a number from 1 to
// 65535". Unknown keys are errors, so a typo never silently falls back to a default, and so is a
// key given twice in one mapping (yaml-cpp keeps the first silently; the loader reports the second).
//
// Before any section is read, the whole document is walked once with aliases expanded: more than
// kMaxConfigNodes nodes (an "alias bomb": a few hundred bytes of nested aliases expand to gigabytes
// when the faults: section is converted) or nesting deeper than kMaxConfigDepth is refused.
//
// Ports: no port may be claimed twice by the listeners' `listen`, their broker_port_range,
// their broker_ports base (node 0), and admin.listen (docs/protocol.md "Broker addresses"); a
// configured port or range inside the kernel's ephemeral range is a warning (config/README.md).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace kproxy::config {

struct ConfigError {
  std::string file;
  int line = 0;    ///< 1-based; 0 when the error has no position (e.g. unreadable file)
  int column = 0;  ///< 1-based
  std::string reason;

  /// "file:line:column: reason".
  std::string to_string() const;
};

/// YAML nodes a config may expand to, aliases counted each time they are used. A real config has
/// a few hundred; 100,000 leaves room for thousands of fault rules and refuses an alias bomb
/// before it costs memory. Not configurable: the file cannot be trusted to set its own bound.
inline constexpr size_t kMaxConfigNodes = 100'000;
/// Nesting depth of mappings and lists; kproxy's deepest key is 6 levels down.
inline constexpr int kMaxConfigDepth = 64;

/// The kernel's ephemeral (local) port range, from /proc/sys/net/ipv4/ip_local_port_range;
/// nullopt when it cannot be read (not Linux, no /proc).
std::optional<PortRange> kernel_ephemeral_ports();
/// Parses the content of ip_local_port_range ("32768\t60999\n"); nullopt when malformed.
std::optional<PortRange> parse_ephemeral_ports(std::string_view text);

/// Where the loader gets facts about the host (injectable for tests).
struct LoadOptions {
  /// The ephemeral port range configured ports are checked against (warnings); empty = skip.
  std::function<std::optional<PortRange>()> ephemeral_ports = kernel_ephemeral_ports;
};

/// The outcome of a load: a config, or every error found (validation does not stop at the first).
struct LoadResult {
  std::shared_ptr<const Config> config;
  std::vector<ConfigError> errors;
  /// Problems that do not stop the start (e.g. a port inside the ephemeral range), same format.
  std::vector<ConfigError> warnings;

  bool ok() const { return config != nullptr; }
  /// All errors, one per line.
  std::string error_text() const;
};

/// Reads and validates the YAML file at `path`.
LoadResult load_config_file(const std::string& path, const LoadOptions& options = {});

/// Parses and validates `yaml`; `source` names it in errors.
LoadResult load_config_string(std::string_view yaml, const std::string& source, const LoadOptions& options = {});

/// One listener entry checked on its own against a running config (the admin API's
/// PUT /listeners/{name}, docs/admin-api.openapi.yaml): the same checks and error texts as a
/// `listeners:` entry of the file, with the running listeners' ports and names claimed first.
struct ListenerEntry {
  std::optional<ListenerConfig> listener;  ///< set when there is no error
  std::vector<ConfigError> errors;
  std::vector<ConfigError> warnings;  ///< e.g. a port inside the kernel's ephemeral range
  /// True when the body read as a mapping whose keys are all ones a run-time listener takes
  /// (name, listen, upstream, advertise, broker_ports, broker_port_range, max_broker_ports,
  /// proxy_protocol) and whose values are scalars (upstream: or a list of scalars). Errors of such
  /// a body are about what it asks for (a port taken, a wildcard address without advertise), not
  /// about its form: the admin API answers them 422, the others 400.
  bool well_formed = false;
  /// True when the only errors are ports that the running config (its listeners, those added at
  /// run time, the admin and Toxiproxy APIs) already claims: the admin API answers 409.
  bool port_conflict = false;
  /// The errors, one per line.
  std::string error_text() const;
};

/// Checks `body` (YAML or JSON: a mapping like one `listeners:` entry) as listener `name`
/// (a `name` in the body must be the same). `running` and `added` (listeners added at run time
/// before) are the listeners already there: the new one is checked as the next entry of the
/// list ("listeners[N]..."). `tls`, `upstream_tls` and `sni` are refused (certificates are read
/// at start and reload only).
ListenerEntry load_listener_entry(std::string_view body, const std::string& name, const Config& running,
                                  const std::vector<ListenerConfig>& added, const std::string& source, const LoadOptions& options = {});

/// "30s", "500ms", "2m", "1h" or a bare number of seconds. nullopt when malformed.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

/// "100MiB", "64KiB", "1GiB", "10MB", "512" (bytes). nullopt when malformed.
std::optional<size_t> parse_byte_size(std::string_view text);

}  // namespace kproxy::config
