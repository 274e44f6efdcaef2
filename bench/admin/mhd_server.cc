// kproxy-admin-mhd: the admin endpoints a libmicrohttpd adapter would serve, for bench/admin/run
// (issue #29: should kproxy's hand-written admin server give way to libmicrohttpd?).
//
//   kproxy-admin-mhd --listen 127.0.0.1:PORT --metrics-file FILE [--connection-limit 256]
//                    [--per-ip-limit 32] [--timeout 5] [--threads 1] [--max-seconds 600]
//
// Serves GET /metrics (the bytes of FILE, e.g. a real kproxy scrape, as Prometheus text) and
// GET /healthz (a small JSON body), 404 for anything else, with the settings a careful adapter
// would use and the same limits as kproxy's AdminServerOptions defaults: an internal polling
// thread on epoll (MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL), at most 256 connections
// (MHD_OPTION_CONNECTION_LIMIT, kproxy's max_pending), 32 per client address
// (MHD_OPTION_PER_IP_CONNECTION_LIMIT, max_pending_per_address), a 5 s timeout
// (MHD_OPTION_CONNECTION_TIMEOUT, kproxy's head_timeout; in MHD it is an inactivity timeout:
// every byte received starts it again). --threads N > 1 uses a pool of N polling threads.
//
// Prints "listening on 127.0.0.1:PORT" once it accepts connections; stops on SIGTERM/SIGINT or
// after --max-seconds, and prints how many connections it saw and refused on the way out.
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Options {
  std::string listen = "127.0.0.1:0";
  std::string metrics_file;
  unsigned connection_limit = 256;
  unsigned per_ip_limit = 32;
  unsigned timeout_s = 5;
  unsigned threads = 1;
  unsigned max_seconds = 600;
};

struct State {
  std::string metrics;
  std::string healthz = "{\"status\":\"ok\"}\n";
  std::atomic<unsigned long> requests{0};
  std::atomic<unsigned long> connections{0};
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "kproxy-admin-mhd: %s\nusage: kproxy-admin-mhd --listen HOST:PORT --metrics-file FILE [--connection-limit N] "
               "[--per-ip-limit N] [--timeout S] [--threads N] [--max-seconds S]\n",
               why);
  std::exit(2);
}

unsigned number(const char* text, const char* name) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v > 1000000) usage((std::string("bad value for ") + name).c_str());
  return static_cast<unsigned>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((std::string(arg) + " needs a value").c_str());
      return argv[++i];
    };
    if (arg == "--listen") o.listen = value();
    else if (arg == "--metrics-file") o.metrics_file = value();
    else if (arg == "--connection-limit") o.connection_limit = number(value(), "--connection-limit");
    else if (arg == "--per-ip-limit") o.per_ip_limit = number(value(), "--per-ip-limit");
    else if (arg == "--timeout") o.timeout_s = number(value(), "--timeout");
    else if (arg == "--threads") o.threads = number(value(), "--threads");
    else if (arg == "--max-seconds") o.max_seconds = number(value(), "--max-seconds");
    else usage((std::string("unknown option ") + std::string(arg)).c_str());
  }
  if (o.metrics_file.empty()) usage("--metrics-file is required");
  if (o.threads == 0) o.threads = 1;
  return o;
}

MHD_Result send_text(MHD_Connection* connection, unsigned status, const std::string& body, const char* content_type) {
  // The bodies live as long as the daemon: MHD sends straight from them, no copy.
  MHD_Response* response = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_PERSISTENT);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_Result result = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return result;
}

MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method, const char* /*version*/,
                      const char* /*upload_data*/, size_t* upload_data_size, void** request_state) {
  auto* state = static_cast<State*>(cls);
  const std::string_view m = method, path = url;
  const bool bodiless = m == MHD_HTTP_METHOD_GET || m == MHD_HTTP_METHOD_HEAD;
  // MHD calls once the head has arrived, then once per piece of body, then once more with none.
  // A GET is answered on the first call; another method's body is read and dropped, then 405.
  static int seen;
  if (*request_state == nullptr) {
    *request_state = &seen;
    if (!bodiless) return MHD_YES;
  } else if (*upload_data_size != 0) {
    *upload_data_size = 0;
    return MHD_YES;
  }
  state->requests.fetch_add(1, std::memory_order_relaxed);
  if (!bodiless) {
    static const std::string kNotAllowed = "{\"error\":\"method not allowed\"}\n";
    return send_text(connection, MHD_HTTP_METHOD_NOT_ALLOWED, kNotAllowed, "application/json");
  }
  if (path == "/metrics") return send_text(connection, MHD_HTTP_OK, state->metrics, "text/plain; version=0.0.4; charset=utf-8");
  if (path == "/healthz") return send_text(connection, MHD_HTTP_OK, state->healthz, "application/json");
  static const std::string kNotFound = "{\"error\":\"no such endpoint\"}\n";
  return send_text(connection, MHD_HTTP_NOT_FOUND, kNotFound, "application/json");
}

void on_connection(void* cls, MHD_Connection* /*connection*/, void** /*socket_context*/, MHD_ConnectionNotificationCode code) {
  if (code == MHD_CONNECTION_NOTIFY_STARTED) static_cast<State*>(cls)->connections.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  State state;
  {
    std::ifstream in(o.metrics_file, std::ios::binary);
    if (!in) usage(("cannot read " + o.metrics_file).c_str());
    std::ostringstream text;
    text << in.rdbuf();
    state.metrics = text.str();
  }
  const size_t colon = o.listen.rfind(':');
  if (colon == std::string::npos) usage("--listen wants HOST:PORT (IPv4)");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(number(o.listen.c_str() + colon + 1, "--listen port")));
  if (::inet_pton(AF_INET, o.listen.substr(0, colon).c_str(), &address.sin_addr) != 1) usage("--listen wants a numeric IPv4 host");

  // Block the stop signals before MHD starts its threads, so they reach sigtimedwait below only.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
  std::vector<MHD_OptionItem> options = {
      {MHD_OPTION_SOCK_ADDR, 0, &address},
      {MHD_OPTION_CONNECTION_LIMIT, o.connection_limit, nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, o.per_ip_limit, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, o.timeout_s, nullptr},
      {MHD_OPTION_LISTEN_BACKLOG_SIZE, 128, nullptr},  // as kproxy's listen(fd, 128)
  };
  if (o.threads > 1) options.push_back({MHD_OPTION_THREAD_POOL_SIZE, o.threads, nullptr});
  options.push_back({MHD_OPTION_END, 0, nullptr});
  MHD_Daemon* daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, &on_request, &state, MHD_OPTION_NOTIFY_CONNECTION, &on_connection,
                                        &state, MHD_OPTION_ARRAY, options.data(), MHD_OPTION_END);
  if (daemon == nullptr) {
    std::fprintf(stderr, "kproxy-admin-mhd: MHD_start_daemon failed on %s\n", o.listen.c_str());
    return 1;
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
  std::printf("listening on %s:%u\n", o.listen.substr(0, colon).c_str(), info ? info->port : 0u);
  std::fflush(stdout);

  timespec limit{static_cast<time_t>(o.max_seconds), 0};
  int signal_number = sigtimedwait(&stop_signals, nullptr, &limit);
  std::fprintf(stderr, "kproxy-admin-mhd: stopping (%s); %lu connections, %lu requests\n",
               signal_number > 0 ? strsignal(signal_number) : "--max-seconds reached", state.connections.load(), state.requests.load());
  MHD_stop_daemon(daemon);
  return 0;
}
