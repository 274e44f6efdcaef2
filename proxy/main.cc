// kproxy: a transparent Kafka wire-protocol proxy.
//
//   kproxy --config FILE        run
//   kproxy check-config FILE    validate a config and exit (0 = fine, 2 = errors, listed)
//   kproxy tap [options]        follow a running kproxy's decoded traffic (proxy/cli/tap_client.h)
//   kproxy ctl COMMAND          fault rules and ApiVersions policy at run time (proxy/cli/ctl_command.h)
//   kproxy --help | --version
//
// The main thread loads the config, starts the workers and then runs a small control loop for
// signals: SIGTERM/SIGINT drain (a second one shortens the deadline to zero), SIGHUP reloads the
// config file (a bad file is refused and the running config stays).
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>
#include <uv.h>

#include "config/config_loader.h"
#include "proxy/admin/admin_runtime.h"
#include "proxy/cli/ctl_command.h"
#include "proxy/util/logging.h"
#include "proxy/runtime/proxy.h"
#include "proxy/runtime/startup_check.h"
#include "proxy/cli/tap_client.h"
#include "proxy/net/uv_handle.h"

namespace {

constexpr const char* kVersion = "0.1.0";

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: kproxy --config FILE      run the proxy\n"
               "       kproxy check-config FILE  validate a config file and exit\n"
               "       kproxy tap [--admin HOST:PORT] [--api NAME] [--errors] ...  follow decoded traffic\n"
               "       kproxy ctl [--admin HOST:PORT] COMMAND  fault rules at run time (kproxy ctl --help)\n"
               "       kproxy --help | --version\n"
               "\n"
               "Signals: SIGTERM/SIGINT drain and exit (again: exit now), SIGHUP reloads the config file.\n");
}

struct ControlLoop {
  uv_loop_t loop;
  kproxy::proxy::UvHandle<uv_signal_t> sigterm, sigint, sighup;
  kproxy::proxy::UvHandle<uv_async_t> stopped;
  kproxy::proxy::Proxy* proxy = nullptr;
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
  std::string error = control->proxy->reload(loaded.config);
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
int report(const kproxy::proxy::StartupCheck& checked) {
  for (const auto& e : checked.errors) std::fprintf(stderr, "%s\n", e.c_str());
  for (const auto& w : checked.warnings) std::fprintf(stderr, "%s\n", w.c_str());
  return checked.ok() ? 0 : 2;
}

// `kproxy check-config FILE`: exactly the checks of the start (check_startup), without binding.
int check_config(const std::string& path) {
  auto checked = kproxy::proxy::check_startup(path);
  if (int status = report(checked); status != 0) return status;
  const auto& config = *checked.loaded.config;
  std::printf("%s: OK (%zu listeners, %u workers)\n", path.c_str(), config.listeners.size(), config.worker_count());
  return 0;
}

int run(const std::string& path) {
  kproxy::proxy::StartupCheckOptions options;
  options.raise_file_limit = true;
  auto checked = kproxy::proxy::check_startup(path, options);
  if (!checked.ok()) return report(checked);
  const auto& loaded = checked.loaded;
  kproxy::proxy::configure_logging(loaded.config->log);
  // Logged, not printed: a JSON log stays one object per line.
  for (const auto& w : checked.warnings) spdlog::warn("{}", w);
  if (!checked.file_limit_raised.empty()) spdlog::info("{}", checked.file_limit_raised);
  std::signal(SIGPIPE, SIG_IGN);

  ControlLoop control;
  control.config_path = path;
  uv_loop_init(&control.loop);
  kproxy::proxy::Proxy proxy(loaded.config);
  control.proxy = &proxy;
  control.stopped.init(&control.loop, &control, uv_async_init, on_workers_stopped);
  // The async handle lives until the control loop ends, after every worker has stopped.
  proxy.set_on_stopped([&control] { uv_async_send(control.stopped.get()); });
  for (auto* s : {&control.sigterm, &control.sigint, &control.sighup}) s->init(&control.loop, &control, uv_signal_init);
  uv_signal_start(control.sigterm.get(), on_stop_signal, SIGTERM);
  uv_signal_start(control.sigint.get(), on_stop_signal, SIGINT);
  uv_signal_start(control.sighup.get(), on_reload_signal, SIGHUP);

  // Admin API, metrics and tap: the observer is installed before connections open.
  kproxy::admin::AdminRuntime admin(proxy, [&proxy, &path]() -> std::string {
    auto reloaded = kproxy::config::load_config_file(path);
    if (!reloaded.ok()) return reloaded.error_text();
    return proxy.reload(reloaded.config);
  });

  std::string error = proxy.start();
  int status = 0;
  if (!error.empty()) {
    spdlog::critical("cannot start: {}", error);
    status = 1;
    close_control_loop(control);
  } else if (std::string admin_error = admin.start(); !admin_error.empty()) {
    spdlog::critical("cannot start the admin API: {}", admin_error);
    status = 1;
    proxy.drain(std::chrono::milliseconds(0));
  }
  uv_run(&control.loop, UV_RUN_DEFAULT);
  admin.stop();
  proxy.join();
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
  if (argc == 3 && std::strcmp(argv[1], "check-config") == 0) return check_config(argv[2]);
  if (argc >= 2 && std::strcmp(argv[1], "tap") == 0) return kproxy::cli::run_tap_command(argc - 2, argv + 2);
  if (argc >= 2 && std::strcmp(argv[1], "ctl") == 0) return kproxy::cli::run_ctl_command(argc - 2, argv + 2);
  if (argc == 3 && std::strcmp(argv[1], "--config") == 0) return run(argv[2]);
  if (argc == 2 && std::strncmp(argv[1], "--config=", 9) == 0) return run(argv[1] + 9);
  print_usage(stderr);
  return 2;
}
