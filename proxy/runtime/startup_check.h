// StartupCheck: everything `kproxy --config FILE` validates before it binds a port, in one
// function, which `kproxy check-config FILE` runs too (issue #15 bug 3: check-config said OK for
// files the start refused, because only Proxy::start read the fault rules and the ApiVersions
// policy). The two commands print the same errors and agree on the exit status (2).
//
//   check_startup(path)
//     ├─ config::load_config_file   YAML, keys, values, port claims, ephemeral-range warnings
//     ├─ prepare_config             faults:/api_versions: sections, TLS contexts  (also what
//     │                             Proxy::start and Proxy::reload run)
//     ├─ unmatched_listener_scopes  listener globs that match no listener (warning)
//     └─ check_file_limit           RLIMIT_NOFILE against what the config may open (warning)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/config_loader.h"
#include "proxy/chaos/config_sections.h"
#include "proxy/tls/listener_tls.h"

namespace kproxy::runtime {

/// What a config turns into before the proxy can run it: the fault rules and ApiVersions policy
/// of its faults:/api_versions: sections, and the TLS contexts of its listeners.
struct PreparedConfig {
  chaos::ChaosConfig chaos;
  std::vector<tls::ListenerTls> tls;
};

/// Builds `out` from `config`. Returns "" or every error, one per line (file:line:column: why).
/// The one place these sections are checked: Proxy::start, Proxy::reload and check_startup.
std::string prepare_config(const config::Config& config, PreparedConfig& out);

/// Scopes that can never apply, one message each: a fault rule's or an ApiVersions entry's
/// `listener` glob that matches none of the config's listener names (a typo, or a listener
/// renamed), so the rule would sit there and never fire. Warnings, not errors: a rule may be
/// staged before its listener exists.
std::vector<std::string> unmatched_listener_scopes(const config::Config& config, const chaos::ChaosConfig& chaos);

/// File descriptors kproxy may need under a config, by what holds them.
struct FdBudget {
  uint64_t connections = 0;  ///< limits.max_connections × 2 (the client and its broker socket)
  uint64_t listeners = 0;    ///< (bootstrap + broker ports) × workers: each worker binds its own
  uint64_t admin = 0;        ///< the admin listener and its connections
  uint64_t slack = 0;        ///< event loops, logs, certificate files, the resolver
  uint64_t total() const { return connections + listeners + admin + slack; }
  /// "20000 for limits.max_connections 10000 × 2 + 516 for ... "
  std::string explain() const;
};
FdBudget fd_budget(const config::Config& config);

/// RLIMIT_NOFILE, read and raised through these (injectable for tests).
struct FileLimit {
  uint64_t soft = 0;
  uint64_t hard = 0;
};
struct FileLimitAccess {
  std::function<std::optional<FileLimit>()> get;
  std::function<bool(uint64_t soft)> set_soft;  ///< true when the new soft limit took
};
/// getrlimit/setrlimit of this process.
FileLimitAccess process_file_limit();

struct FileLimitCheck {
  std::string raised;   ///< "" or what was raised (logged as info)
  std::string warning;  ///< "" or why the limit is too low (logged as a warning)
  /// limits.max_connections was not set and the default does not fit: the value that does.
  std::optional<size_t> fitted_max_connections;
  std::string fitted;  ///< "" or what was fitted and why (logged once, as info)
};
/// The limits.max_connections that fits `soft_limit` open files beside everything else `config`
/// needs (fd_budget), when the config left it unset and its default does not fit; else nullopt.
/// Never below 1.
std::optional<size_t> fit_max_connections(const config::Config& config, uint64_t soft_limit);
/// `config` with fit_max_connections applied for the process's current soft limit (a reload:
/// the running process raised its limit at the start). `note` receives the info line, if any.
std::shared_ptr<const config::Config> fitted_to_file_limit(std::shared_ptr<const config::Config> config, std::string* note = nullptr);
/// Compares the soft limit with fd_budget(config). Too low: with `raise`, sets the soft limit to
/// min(hard, budget) and warns only if that still falls short; without (check-config, which runs
/// in another process), warns only if the hard limit falls short, since a start would raise it.
FileLimitCheck check_file_limit(const config::Config& config, const FileLimitAccess& access, bool raise);

struct StartupCheckOptions {
  config::LoadOptions load;
  FileLimitAccess file_limit = process_file_limit();
  bool raise_file_limit = false;  ///< the start raises it; check-config does not
};

struct StartupCheck {
  config::LoadResult loaded;
  PreparedConfig prepared;
  std::vector<std::string> errors;    ///< "file:line:column: reason"; any error refuses the file
  std::vector<std::string> warnings;  ///< "file:line:column: warning: reason" or a warning without position
  std::string file_limit_raised;      ///< "" or the RLIMIT_NOFILE change made (with raise_file_limit)
  std::vector<std::string> notes;     ///< decisions taken for the user, logged once at info level
  bool ok() const { return errors.empty(); }
};

/// Loads `path` and runs every check the start runs before binding a port.
StartupCheck check_startup(const std::string& path, const StartupCheckOptions& options = {});

}  // namespace kproxy::runtime
