#include "proxy/runtime/startup_check.h"

#include <algorithm>
#include <exception>

#include <sys/resource.h>

#include "codec/generated/api_keys.h"

namespace kproxy::runtime {

std::string prepare_config(const config::Config& config, PreparedConfig& out) {
  std::string errors;
  // The config loader has already refused what the section parsers are known to choke on
  // (invalid UTF-8, alias bombs); an exception still escaping them refuses the file (and keeps
  // a running proxy on reload) instead of terminating the process.
  try {
    errors = chaos::load_chaos_config(config, out.chaos);
  } catch (const std::exception& e) {
    errors = config.source + ": the faults: or api_versions: section cannot be read: " + e.what() + "\n";
  }
  // TLS is checked even when the sections failed, so one run lists every problem.
  std::string tls_errors = tls::build_listener_tls(config, out.tls);
  if (!tls_errors.empty()) {
    if (!errors.empty() && errors.back() != '\n') errors += '\n';
    errors += tls_errors;
  }
  return errors;
}

namespace {

// Stdio and logs, the control loop, certificate and config files read at reload, the resolver's
// sockets: an estimate with room to spare (each worker's loop is counted apart, 8 each).
constexpr uint64_t kSlackFds = 64;
// The admin HTTP server: its listener plus one connection per server thread, and room for the
// connections queued while they are busy (proxy/admin/admin_server.h).
constexpr uint64_t kAdminFds = 64;

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

FdBudget fd_budget(const config::Config& config) {
  FdBudget b;
  b.connections = uint64_t{config.limits.max_connections} * 2;
  uint64_t ports = 0;
  for (const auto& l : config.listeners) {
    uint64_t broker_ports = l.broker_ports.max_ports;
    if (l.broker_ports.scheme == config::BrokerPorts::Scheme::kInOrder) {
      broker_ports = std::min<uint64_t>(broker_ports, uint64_t{l.broker_ports.last} - l.broker_ports.first + 1);
    }
    ports += 1 + broker_ports;
  }
  b.listeners = ports * config.worker_count();
  b.admin = config.admin.listen ? kAdminFds : 0;
  b.slack = kSlackFds + uint64_t{config.worker_count()} * 8;
  return b;
}

std::string FdBudget::explain() const {
  return std::to_string(total()) + " = " + std::to_string(connections) + " for limits.max_connections × 2 (client and broker socket) + " +
         std::to_string(listeners) + " for bootstrap and broker ports (max_broker_ports or the range) × workers + " +
         std::to_string(admin) + " for the admin API + " + std::to_string(slack) + " for event loops, logs and files";
}

std::vector<std::string> unmatched_listener_scopes(const config::Config& config, const chaos::ChaosConfig& chaos) {
  std::string names;
  for (const auto& l : config.listeners) names += (names.empty() ? "'" : ", '") + l.name + "'";
  auto matches_none = [&config](const std::optional<std::string>& glob) {
    return glob && std::none_of(config.listeners.begin(), config.listeners.end(),
                                [&glob](const config::ListenerConfig& l) { return chaos::glob_match(*glob, l.name); });
  };
  std::vector<std::string> out;
  auto add = [&](const std::string& what, const std::string& glob) {
    out.push_back(what + ": listener '" + glob + "' matches none of the listeners (" + names + "), so it never applies");
  };
  for (const auto& rule : chaos.rules) {
    if (matches_none(rule->match.listener)) add("fault rule '" + rule->name + "'", *rule->match.listener);
  }
  for (size_t i = 0; i < chaos.api_versions.apis.size(); ++i) {
    const auto& scope = chaos.api_versions.apis[i].scope.listener;
    const char* api = codec::api_name(chaos.api_versions.apis[i].api);
    if (matches_none(scope))
      add("api_versions entry for " + (api ? std::string(api) : std::to_string(chaos.api_versions.apis[i].api)), *scope);
  }
  for (const auto& feature : chaos.api_versions.features) {
    if (matches_none(feature.scope.listener)) add("api_versions entry for feature " + feature.name, *feature.scope.listener);
  }
  return out;
}

FileLimitAccess process_file_limit() {
  FileLimitAccess access;
  access.get = []() -> std::optional<FileLimit> {
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return std::nullopt;
    return FileLimit{static_cast<uint64_t>(r.rlim_cur), static_cast<uint64_t>(r.rlim_max)};
  };
  access.set_soft = [](uint64_t soft) {
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return false;
    r.rlim_cur = static_cast<rlim_t>(soft);
    return setrlimit(RLIMIT_NOFILE, &r) == 0;
  };
  return access;
}

FileLimitCheck check_file_limit(const config::Config& config, const FileLimitAccess& access, bool raise) {
  FileLimitCheck out;
  if (!access.get) return out;
  auto limit = access.get();
  if (!limit) return out;
  FdBudget budget = fd_budget(config);
  const uint64_t need = budget.total();
  if (limit->soft >= need) return out;
  uint64_t soft = limit->soft;
  if (raise && access.set_soft) {
    uint64_t target = std::min(limit->hard, need);
    if (target > soft && access.set_soft(target)) {
      out.raised = "raised the open-file limit (RLIMIT_NOFILE) from " + std::to_string(soft) + " to " + std::to_string(target) +
                   " (the hard limit is " + std::to_string(limit->hard) + "): this config may need " + budget.explain();
      soft = target;
    }
  } else if (!raise) {
    soft = std::min(limit->hard, need);  // what a start would raise it to
  }
  if (soft >= need) return out;
  // Past the limit every accept() fails with EMFILE: clients are dropped, brokers unreachable.
  uint64_t fixed = budget.listeners + budget.admin + budget.slack;
  uint64_t connections = soft > fixed ? (soft - fixed) / 2 : 0;
  if (auto fitted = fit_max_connections(config, soft)) {
    // The user chose nothing: a default that does not fit the host is ours to lower, not theirs
    // to be warned about (issue #30: the README's minimal config warned on a common host).
    out.fitted_max_connections = fitted;
    out.fitted = "limits.max_connections is not set: " + std::to_string(*fitted) + " client connections (not the default " +
                 std::to_string(config::Limits{}.max_connections) + ") fit the open-file limit (RLIMIT_NOFILE) " + std::to_string(soft) +
                 (raise ? "" : " (the hard limit)") + " beside " + std::to_string(fixed) +
                 " descriptors for listeners, the admin API and the loops; set limits.max_connections or raise the limit to change it";
    return out;
  }
  out.warning = "the open-file limit (RLIMIT_NOFILE) is " + std::to_string(soft) + (raise ? "" : " at most (the hard limit)") +
                " but this config may need " + budget.explain() + ": only about " + std::to_string(connections) +
                " client connections fit; raise the limit (ulimit -n, systemd LimitNOFILE=, the container's nofile ulimit) or lower "
                "limits.max_connections";
  return out;
}

std::optional<size_t> fit_max_connections(const config::Config& config, uint64_t soft_limit) {
  if (!config.limits.max_connections_default) return std::nullopt;
  FdBudget budget = fd_budget(config);
  if (soft_limit >= budget.total()) return std::nullopt;
  uint64_t fixed = budget.listeners + budget.admin + budget.slack;
  uint64_t connections = soft_limit > fixed ? (soft_limit - fixed) / 2 : 0;
  return static_cast<size_t>(std::max<uint64_t>(connections, 1));
}

std::shared_ptr<const config::Config> fitted_to_file_limit(std::shared_ptr<const config::Config> config, std::string* note) {
  auto limit = process_file_limit().get();
  if (!limit || !config) return config;
  auto fitted = fit_max_connections(*config, limit->soft);
  if (!fitted) return config;
  auto copy = std::make_shared<config::Config>(*config);
  copy->limits.max_connections = *fitted;
  if (note)
    *note = "limits.max_connections is not set: " + std::to_string(*fitted) + " client connections fit the open-file limit " +
            std::to_string(limit->soft);
  return copy;
}

StartupCheck check_startup(const std::string& path, const StartupCheckOptions& options) {
  StartupCheck out;
  out.loaded = config::load_config_file(path, options.load);
  for (const auto& w : out.loaded.warnings) {
    config::ConfigError e = w;
    e.reason = "warning: " + e.reason;
    out.warnings.push_back(e.to_string());
  }
  if (!out.loaded.ok()) {
    for (const auto& e : out.loaded.errors) out.errors.push_back(e.to_string());
    return out;
  }
  const config::Config& config = *out.loaded.config;
  if (std::string errors = prepare_config(config, out.prepared); !errors.empty()) {
    out.errors = split_lines(errors);
  } else {
    for (const auto& w : unmatched_listener_scopes(config, out.prepared.chaos)) out.warnings.push_back(path + ": warning: " + w);
  }
  FileLimitCheck limit = check_file_limit(config, options.file_limit, options.raise_file_limit);
  if (!limit.warning.empty()) out.warnings.push_back(path + ": warning: " + limit.warning);
  out.file_limit_raised = std::move(limit.raised);
  if (limit.fitted_max_connections) {
    auto copy = std::make_shared<config::Config>(config);
    copy->limits.max_connections = *limit.fitted_max_connections;
    out.loaded.config = std::move(copy);
    out.notes.push_back(std::move(limit.fitted));
  }
  return out;
}

}  // namespace kproxy::runtime
