// kproxy: a transparent Kafka wire-protocol proxy.
//
//   kproxy --config FILE        run
//   kproxy check-config FILE    validate a config and exit (0 = fine, 2 = errors, listed)
//   kproxy tap [options]        follow a running kproxy's decoded traffic (proxy/cli/tap_client.h)
//   kproxy ctl COMMAND          fault rules and ApiVersions policy at run time (proxy/cli/ctl_command.h)
//   kproxy transactions [show ID]  the transactions kproxy sees (kproxy ctl transactions)
//   kproxy --help | --version
//
// The main thread loads the config, starts the workers and then runs a small control loop for
// signals: SIGTERM/SIGINT drain (a second one shortens the deadline to zero), SIGHUP reloads the
// config file (a bad file is refused and the running config stays).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>
#include <uv.h>

#include "config/config_loader.h"
#include "proxy/admin/admin_runtime.h"
#include "proxy/cli/ctl_command.h"
#include "proxy/cli/tap_client.h"
#include "proxy/net/uv_handle.h"
#include "proxy/runtime/memory_return.h"
#include "proxy/runtime/proxy.h"
#include "proxy/runtime/startup_check.h"
#include "proxy/services/process_services.h"
#include "proxy/toxiproxy/toxiproxy_runtime.h"
#include "proxy/util/logging.h"

namespace {

constexpr const char* kVersion = "0.1.0";

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: kproxy --config FILE [--scenario FILE]  run the proxy (with a fault scenario on top, scenarios/)\n"
               "       kproxy check-config FILE [--scenario FILE]  validate a config (and a scenario) and exit\n"
               "       kproxy tap [--admin HOST:PORT] [--api NAME] [--errors] ...  follow decoded traffic\n"
               "       kproxy ctl [--admin HOST:PORT] COMMAND  fault rules at run time (kproxy ctl --help)\n"
               "       kproxy transactions [--admin HOST:PORT] [show ID]  open transactions, or one id's history\n"
               "       kproxy --help | --version\n"
               "\n"
               "Signals: SIGTERM/SIGINT drain and exit (again: exit now), SIGHUP reloads the config file.\n");
}

struct ControlLoop {
  uv_loop_t loop;
  kproxy::net::UvHandle<uv_signal_t> sigterm, sigint, sighup;
  kproxy::net::UvHandle<uv_async_t> stopped;
  kproxy::runtime::Proxy* proxy = nullptr;
  std::string config_path;
  int drain_requests = 0;
};

void on_stop_signal(uv_signal_t* handle, int signum) {
  auto* control = static_cast<ControlLoop*>(handle->data);
  spdlog::info("received {}", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  if (control->drain_requests++ == 0) control->proxy->drain();
  else control->proxy->drain(std::chrono::milliseconds(0));
}

void on_reload_signal(uv_signal_t* handle, int) {
  auto* control = static_cast<ControlLoop*>(handle->data);
  spdlog::info("received SIGHUP: reloading {}", control->config_path);
  auto loaded = kproxy::config::load_config_file(control->config_path);
  for (const auto& w : loaded.warnings) spdlog::warn("{}", w.to_string());
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) spdlog::error("reload refused, keeping the running config: {}", e.to_string());
    return;
  }
  std::string error = control->proxy->reload(kproxy::runtime::fitted_to_file_limit(loaded.config));
  if (!error.empty()) spdlog::error("reload refused, keeping the running config: {}", error);
}

/// Every worker has ended: closing the control loop's handles ends uv_run.
void close_control_loop(ControlLoop& control) {
  for (auto* s : {&control.sigterm, &control.sigint, &control.sighup}) s->close();
  control.stopped.close();
}

void on_workers_stopped(uv_async_t* handle) { close_control_loop(*static_cast<ControlLoop*>(handle->data)); }

// check-config and the start print a file's problems the same way: errors, then warnings, one
// per line, on stderr. Returns the exit status of a refused file (2), or 0.
int report(const kproxy::runtime::StartupCheck& checked) {
  for (const auto& e : checked.errors) std::fprintf(stderr, "%s\n", e.c_str());
  for (const auto& w : checked.warnings) std::fprintf(stderr, "%s\n", w.c_str());
  return checked.ok() ? 0 : 2;
}

// `kproxy check-config FILE`: exactly the checks of the start (check_startup), without binding.
/// Loads the scenario file `path` ("" = none) into `out` and checks it against the config's own
/// rules (`checked`); prints the errors. False on errors.
bool load_scenario(const std::string& path, const kproxy::runtime::StartupCheck& checked,
                   std::shared_ptr<const kproxy::chaos::Scenario>& out) {
  if (path.empty()) return true;
  auto s = std::make_shared<kproxy::chaos::Scenario>();
  if (std::string errors = kproxy::chaos::load_scenario_file(path, *s); !errors.empty()) {
    std::fputs(errors.c_str(), stderr);
    std::fprintf(stderr, "%s: refused\n", path.c_str());
    return false;
  }
  kproxy::chaos::ChaosConfig merged = checked.prepared.chaos;
  if (std::string e = kproxy::chaos::apply_scenario(merged, *s, checked.loaded.config->limits.max_fault_rules); !e.empty()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), e.c_str());
    return false;
  }
  out = std::move(s);
  return true;
}

int check_config(const std::string& path, const std::string& scenario_path) {
  auto checked = kproxy::runtime::check_startup(path);
  if (int status = report(checked); status != 0) return status;
  const auto& config = *checked.loaded.config;
  for (const auto& note : checked.notes) std::printf("%s: note: %s\n", path.c_str(), note.c_str());
  std::printf("%s: OK (%zu listeners, %u workers)\n", path.c_str(), config.listeners.size(), config.worker_count());
  std::shared_ptr<const kproxy::chaos::Scenario> scenario;
  if (!load_scenario(scenario_path, checked, scenario)) return 1;
  if (scenario) {
    std::printf("%s: OK (scenario '%s' v%d: %zu rules)\n", scenario_path.c_str(), scenario->name.c_str(), scenario->version,
                scenario->chaos.rules.size());
  }
  return 0;
}

int run(const std::string& path, const std::string& scenario_path) {
  kproxy::runtime::StartupCheckOptions options;
  options.raise_file_limit = true;
  auto checked = kproxy::runtime::check_startup(path, options);
  if (!checked.ok()) return report(checked);
  std::shared_ptr<const kproxy::chaos::Scenario> scenario;
  if (!load_scenario(scenario_path, checked, scenario)) return 1;
  const auto& loaded = checked.loaded;
  kproxy::util::configure_logging(loaded.config->log);
  // Logged, not printed: a JSON log stays one object per line.
  for (const auto& w : checked.warnings) spdlog::warn("{}", w);
  if (!checked.file_limit_raised.empty()) spdlog::info("{}", checked.file_limit_raised);
  for (const auto& note : checked.notes) spdlog::info("{}", note);
  std::signal(SIGPIPE, SIG_IGN);
  // Large buffers are unmapped when freed (proxy/runtime/memory_return.h, docs/architecture.md "Memory").
  if (!kproxy::runtime::configure_allocator()) spdlog::debug("allocator: not glibc's malloc, its mmap threshold is left as it is");

  ControlLoop control;
  control.config_path = path;
  uv_loop_init(&control.loop);
  // Everything the layers share (metrics, tap, topic names, the frame observer and transaction
  // tracker, traces, the clock), built once here from the config (proxy/services/process_services.h).
  kproxy::services::ProcessServices services(*loaded.config);
  kproxy::runtime::Proxy proxy(loaded.config, services.view());
  control.proxy = &proxy;
  if (scenario) {
    // Checked against the config above; a failure here would be a file changed in between.
    if (std::string e = proxy.set_scenario(scenario); !e.empty()) spdlog::error("{}: scenario not applied: {}", scenario_path, e);
  }
  control.stopped.init(&control.loop, &control, uv_async_init, on_workers_stopped);
  // The async handle lives until the control loop ends, after every worker has stopped.
  proxy.set_on_stopped([&control] { uv_async_send(control.stopped.get()); });
  for (auto* s : {&control.sigterm, &control.sigint, &control.sighup}) s->init(&control.loop, &control, uv_signal_init);
  uv_signal_start(control.sigterm.get(), on_stop_signal, SIGTERM);
  uv_signal_start(control.sigint.get(), on_stop_signal, SIGINT);
  uv_signal_start(control.sighup.get(), on_reload_signal, SIGHUP);

  // Admin API: routes over the services (metrics, tap, transactions) and the proxy.
  kproxy::admin::AdminRuntime admin(proxy, services, [&proxy, &path]() -> std::string {
    auto reloaded = kproxy::config::load_config_file(path);
    if (!reloaded.ok()) return reloaded.error_text();
    return proxy.reload(kproxy::runtime::fitted_to_file_limit(reloaded.config));
  });

  // toxiproxy: Toxiproxy's HTTP API (docs/toxiproxy.md), opened once the Kafka listeners run.
  kproxy::toxiproxy::ToxiproxyRuntime toxiproxy(loaded.config->toxiproxy, std::string("kproxy ") + kVersion + " (Toxiproxy API v2)",
                                                &proxy);

  // The admin API opens first: whoever sees a Kafka port open can call it already (a test that
  // waits for the Kafka port, then PUTs a fault rule). /readyz says "starting" until the Kafka
  // listeners are bound and every worker runs (README "Started").
  int status = 0;
  if (std::string admin_error = admin.start(); !admin_error.empty()) {
    spdlog::critical("cannot start the admin API: {}", admin_error);
    status = 1;
    close_control_loop(control);
  } else if (std::string error = proxy.start(); !error.empty()) {
    spdlog::critical("cannot start: {}", error);
    status = 1;
    close_control_loop(control);
  } else if (std::string toxiproxy_error = toxiproxy.start(); !toxiproxy_error.empty()) {
    spdlog::critical("cannot start the Toxiproxy API: {}", toxiproxy_error);
    status = 1;
    proxy.drain(std::chrono::milliseconds(0));
  }
  uv_run(&control.loop, UV_RUN_DEFAULT);
  toxiproxy.stop();
  admin.stop();
  proxy.join();
  services.stop();  // the traces still queued are sent
  if (uv_loop_close(&control.loop) != 0) spdlog::error("control loop did not close cleanly");
  if (status == 0) spdlog::info("kproxy stopped");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    print_usage(stdout);
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("kproxy %s (Kafka protocol 4.4.0, libuv %s)\n", kVersion, uv_version_string());
    return 0;
  }
  // --config FILE | --config=FILE, check-config FILE, each with an optional --scenario FILE.
  std::string config_path, scenario_path;
  bool check = false, bad = false;
  for (int i = 1; i < argc && !bad; ++i) {
    std::string a = argv[i];
    if (i == 1 && a == "check-config" && i + 1 < argc) {
      check = true;
      config_path = argv[++i];
    } else if (a == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      config_path = a.substr(9);
    } else if (a == "--scenario" && i + 1 < argc) {
      scenario_path = argv[++i];
    } else if (a.rfind("--scenario=", 0) == 0) {
      scenario_path = a.substr(11);
    } else {
      bad = true;
    }
  }
  bool subcommand =
      argc >= 2 && (std::strcmp(argv[1], "tap") == 0 || std::strcmp(argv[1], "ctl") == 0 || std::strcmp(argv[1], "transactions") == 0);
  if (!bad && !config_path.empty() && !subcommand) {
    return check ? check_config(config_path, scenario_path) : run(config_path, scenario_path);
  }
  if (argc >= 2 && std::strcmp(argv[1], "tap") == 0) return kproxy::cli::run_tap_command(argc - 2, argv + 2);
  if (argc >= 2 && std::strcmp(argv[1], "ctl") == 0) return kproxy::cli::run_ctl_command(argc - 2, argv + 2);
  if (argc >= 2 && std::strcmp(argv[1], "transactions") == 0) return kproxy::cli::run_ctl_command(argc - 1, argv + 1);
  print_usage(stderr);
  return 2;
}
