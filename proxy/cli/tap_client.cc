#include "proxy/cli/tap_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "config/admin_token.h"
#include "proxy/cli/admin_client.h"

namespace kproxy::cli {
namespace {

std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out.push_back(static_cast<char>(c));
    else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace

std::string transaction_event_text(const std::string& time, const nlohmann::json& j) {
  auto str = [&](const char* key) { return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string("-"); };
  std::string out = time + " txn " + str("transactional_id") + " pid=" + j.value("producer_id", nlohmann::json(-1)).dump() +
                    " epoch=" + j.value("producer_epoch", nlohmann::json(-1)).dump() + " " + str("transaction");
  std::string kind = str("transaction");
  if (kind == "begin") {
    out += " client=" + str("client_id") + " (" + str("api") + ")";
  } else if (kind == "partitions_added") {
    std::string parts;
    for (const auto& p : j.value("partitions", nlohmann::json::array()))
      if (p.is_object())
        parts += (parts.empty() ? "" : ",") + p.value("topic", std::string("?")) + "-" + p.value("partition", nlohmann::json(0)).dump();
    out += " " + parts + " (" + str("api") + ")";
  } else if (kind == "offsets_added") {
    out += " group=" + str("group") + " (" + str("api") + ")";
  } else if (kind == "error") {
    out += " " + str("api") + ":" + str("error");
    if (j.contains("injected_by") && j["injected_by"].is_string()) out += " (injected by rule " + j["injected_by"].get<std::string>() + ")";
  } else if (kind == "end") {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", j.value("duration_ms", 0.0));
    out += " " + str("outcome") + " after " + ms + " ms, " + j.value("records", nlohmann::json(0)).dump() + " records";
    if (j.contains("cause") && j["cause"].is_object()) {
      const auto& c = j["cause"];
      out += ", cause " + c.value("api", std::string("?")) + ":" + c.value("error", std::string("?"));
      if (c.contains("injected_by") && c["injected_by"].is_string()) out += " (rule " + c["injected_by"].get<std::string>() + ")";
    }
  }
  return out + "\n";
}

namespace {

void print_readable(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    std::printf("%s\n", line.c_str());
    return;
  }
  if (j.contains("dropped")) {
    std::printf("... %s events dropped (reader too slow)\n", j["dropped"].dump().c_str());
    return;
  }
  std::string ts = j.value("ts", "");
  if (ts.size() > 11) ts = ts.substr(11);  // time of day
  if (j.contains("transaction")) {         // a transaction lifecycle event (--transactions)
    std::fputs(transaction_event_text(ts, j).c_str(), stdout);
    return;
  }
  bool response = j.value("direction", "") == "response";
  std::printf("%s conn=%s client=%s %s %s v%d corr=%d", ts.c_str(), j["connection"].dump().c_str(), j.value("client_id", "").c_str(),
              response ? "<-" : "->", j.value("api", "?").c_str(), j.value("version", -1), j.value("correlation_id", -1));
  if (response) std::printf(" %.3fms", j.value("latency_ms", 0.0));
  if (j.contains("client_software")) {
    std::printf(" [%s %s]", j["client_software"].value("name", "").c_str(), j["client_software"].value("version", "").c_str());
  }
  if (j.contains("body")) std::printf(" %s", j["body"].dump().c_str());
  if (j.contains("decode_error")) std::printf(" decode error: %s", j["decode_error"].get<std::string>().c_str());
  std::printf("\n");
}

void usage() {
  std::fprintf(stderr,
               "usage: kproxy tap [--admin HOST:PORT] [--token TOKEN | --token-file PATH] [--json] [--api NAME] [--client-id ID]\n"
               "                  [--connection N] [--direction request|response] [--errors] [--transactions]\n"
               "  --transactions: one line per transaction step (begin, partitions added, offsets added, error, end)\n"
               "                  instead of frames (docs/transactions.md)\n"
               "  The admin address defaults to $KPROXY_ADMIN, then 127.0.0.1:9644; the token to $KPROXY_ADMIN_TOKEN.\n");
}

}  // namespace

int run_tap_command(int argc, char** argv) {
  std::string admin = std::getenv("KPROXY_ADMIN") && *std::getenv("KPROXY_ADMIN") ? std::getenv("KPROXY_ADMIN") : "127.0.0.1:9644";
  std::string token = std::getenv("KPROXY_ADMIN_TOKEN") ? std::getenv("KPROXY_ADMIN_TOKEN") : "";
  bool raw = false;
  std::string query;
  auto add = [&](const char* key, const std::string& value) {
    query += (query.empty() ? "?" : "&") + std::string(key) + "=" + url_encode(value);
  };
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--admin") admin = value();
    else if (a == "--token") token = value();
    else if (a == "--token-file") {
      std::string path = value();
      auto read = config::read_admin_token_file(path);
      if (!read) {
        std::fprintf(stderr, "kproxy tap: cannot read the token file '%s'\n", path.c_str());
        return 2;
      }
      token = std::move(*read);
    } else if (a == "--json") raw = true;
    else if (a == "--api") add("api", value());
    else if (a == "--client-id") add("client_id", value());
    else if (a == "--connection") add("connection", value());
    else if (a == "--direction") add("direction", value());
    else if (a == "--errors") add("errors", "true");
    else if (a == "--transactions") add("transactions", "true");
    else {
      usage();
      return 2;
    }
  }
  std::string error;
  int fd = connect_admin(admin, error);
  if (fd < 0) {
    std::fprintf(stderr, "kproxy tap: %s\n", error.c_str());
    return 1;
  }
  if (!send_all(fd, admin_request_head("GET", "/tap" + query, admin, token) + "\r\n")) {
    ::close(fd);
    return 1;
  }

  std::string body_lines, refusal;
  int status = 0;
  auto emit_lines = [&] {
    size_t nl;
    while ((nl = body_lines.find('\n')) != std::string::npos) {
      std::string line = body_lines.substr(0, nl);
      body_lines.erase(0, nl + 1);
      if (line.empty()) continue;  // keep-alive
      if (raw) std::printf("%s\n", line.c_str());
      else print_readable(line);
      std::fflush(stdout);
    }
  };
  bool answered = read_response(
      fd,
      [&](int s) {
        status = s;
        return true;
      },
      [&](std::string_view piece) {
        if (status != 200) {
          refusal.append(piece);  // the error body, shown below
        } else {
          body_lines.append(piece);
          emit_lines();
        }
        return true;
      },
      error);
  ::close(fd);
  if (!answered) {
    std::fprintf(stderr, "kproxy tap: %s from %s\n", error.c_str(), admin.c_str());
    return 1;
  }
  if (status != 200) {
    std::fprintf(stderr, "kproxy tap: HTTP %d: %s\n", status, refusal.c_str());
    return 1;
  }
  emit_lines();
  return 0;
}

}  // namespace kproxy::cli
