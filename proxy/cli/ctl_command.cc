#include "proxy/cli/ctl_command.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "proxy/cli/admin_client.h"

namespace kproxy::cli {

const char* ctl_usage() {
  return "usage: kproxy ctl [--admin HOST:PORT] [--token TOKEN] [--json] COMMAND\n"
         "  faults list                   the fault rules as a table: name, API, action, trigger, hits, injected\n"
         "                                (--json: the admin API's JSON, for scripts)\n"
         "  faults get NAME               one rule\n"
         "  faults put NAME RULE          add or replace a rule (RULE: JSON, @FILE or - for stdin)\n"
         "  faults delete NAME            remove a rule\n"
         "  faults reset                  remove every rule\n"
         "  api-versions get              the ApiVersions policy (clamp/hide per API and per feature)\n"
         "  api-versions put LIST         replace it (LIST: JSON, @FILE or -)\n"
         "  scenario apply FILE           apply a scenario file (scenarios/*.yaml) on top of the config's rules\n"
         "  scenario show                 the scenario applied now\n"
         "  scenario clear                back to the config's rules and ApiVersions policy\n"
         "  reload                        re-read the config file\n"
         "  transactions [list] [--last N]  the open transactions, then the N (default 20) most recent ended ones,\n"
         "                                newest first, with outcome, cause and the rule that injected each error,\n"
         "                                and the counts by outcome since start (also `kproxy transactions`)\n"
         "  transactions --open           only the transactions open now, oldest first\n"
         "  transactions show ID          one transactional.id's recent transactions and its open one\n"
         "The admin address defaults to $KPROXY_ADMIN, then 127.0.0.1:9644; the token to $KPROXY_ADMIN_TOKEN.\n"
         "The API and the rule format: docs/admin-api.openapi.yaml (kproxy serves it at GET /openapi.json).\n"
         "Example: kproxy ctl faults put slow '{\"match\":{\"api\":\"Produce\"},\"action\":{\"delay\":\"200ms\"}}'\n"
         "Example: kproxy ctl api-versions put '[{\"feature\":\"transaction.version\",\"max\":1,\"client_id\":\"legacy-*\"}]'\n"
         "  (clients whose client.id matches legacy-* use the pre-KIP-890 transaction protocol; docs/api-versions-policy.md)\n";
}

namespace {

bool read_body(const std::string& arg, std::string& out, std::string& error) {
  if (arg == "-") {
    out.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  if (!arg.empty() && arg[0] == '@') {
    std::ifstream f(arg.substr(1), std::ios::binary);
    if (!f) {
      error = "cannot read " + arg.substr(1) + ": " + std::strerror(errno);
      return false;
    }
    out.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    return true;
  }
  out = arg;
  return true;
}

// Rule names are [A-Za-z0-9._-] (fault_rule.cc); anything else is refused here rather than sent
// as a path that would mean something else.
bool valid_name(const std::string& n, std::string& error) {
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')) {
      error = "'" + n + "' is not a valid rule name (1-128 of A-Z a-z 0-9 - _ .)";
      return false;
    }
  }
  if (n.empty() || n.size() > 128) {
    error = "'" + n + "' is not a valid rule name (1-128 of A-Z a-z 0-9 - _ .)";
    return false;
  }
  return true;
}

struct HttpResult {
  int status = 0;
  std::string body;
  std::string error;  ///< transport failure
};

HttpResult http_call(const CtlCall& call) {
  HttpResult result;
  int fd = connect_admin(call.admin, result.error);
  if (fd < 0) return result;
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string request = admin_request_head(call.method, call.path, call.admin, call.token);
  if (!call.body.empty() || call.method == "PUT" || call.method == "POST") {
    request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(call.body.size()) + "\r\n";
  }
  request += "\r\n" + call.body;
  if (!send_all(fd, request)) {
    result.error = std::string("sending to ") + call.admin + " failed: " + std::strerror(errno);
    ::close(fd);
    return result;
  }
  std::string transport_error;
  bool answered = read_response(
      fd,
      [&](int status) {
        result.status = status;
        return true;
      },
      [&](std::string_view piece) {
        result.body.append(piece);
        return true;
      },
      transport_error);
  ::close(fd);
  if (!answered) result.error = transport_error + " from " + call.admin;
  return result;
}

}  // namespace

namespace {
/// `text` as one path segment: every byte but A-Z a-z 0-9 - . _ ~ percent-encoded (RFC 3986).
std::string percent_encode(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

/// A JSON value as one short cell: strings bare, objects as "k=v k=v", arrays joined by ",".
std::string cell(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string out;
    for (const auto& e : v) out += (out.empty() ? "" : ",") + cell(e);
    return out;
  }
  if (v.is_object()) {
    std::string out;
    for (const auto& [k, e] : v.items()) out += (out.empty() ? "" : " ") + k + (e.is_object() ? "={" + cell(e) + "}" : "=" + cell(e));
    return out;
  }
  return v.dump();
}
}  // namespace

std::string text_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string fault_table(const nlohmann::json& rules) {
  std::vector<std::vector<std::string>> rows{{"NAME", "API", "ACTION", "TRIGGER", "HITS", "INJECTED"}};
  if (rules.is_array()) {
    for (const auto& r : rules) {
      if (!r.is_object()) continue;
      nlohmann::json match = r.value("match", nlohmann::json::object());
      std::string api = match.is_object() && match.contains("api") ? cell(match["api"]) : "*";
      if (match.is_object()) {
        for (const auto& [k, v] : match.items()) {
          if (k != "api") api += " " + k + "=" + cell(v);
        }
      }
      rows.push_back({cell(r.value("name", nlohmann::json())), api, cell(r.value("action", nlohmann::json())),
                      r.contains("trigger") ? cell(r["trigger"]) : "always", cell(r.value("hits", nlohmann::json(0))),
                      cell(r.value("injected", nlohmann::json(0)))});
    }
  }
  if (rows.size() == 1) return "no fault rules\n";
  return text_table(rows);
}

std::string transaction_table(const nlohmann::json& transactions) {
  std::vector<std::vector<std::string>> rows{
      {"TRANSACTIONAL_ID", "PRODUCER", "EPOCH", "OUTCOME", "AGE_S", "PARTITIONS", "RECORDS", "RETRIES", "CLIENT", "LAST_ERROR"}};
  auto seconds = [](const nlohmann::json& v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v.is_number() ? v.get<double>() : 0.0);
    return std::string(buf);
  };
  if (transactions.is_array()) {
    for (const auto& t : transactions) {
      if (!t.is_object()) continue;
      std::string partitions;
      for (const auto& p : t.value("partitions", nlohmann::json::array())) {
        if (p.is_object())
          partitions += (partitions.empty() ? "" : ",") + cell(p.value("topic", nlohmann::json())) + "-" +
                        cell(p.value("partition", nlohmann::json()));
      }
      nlohmann::json last = t.value("last_error", nlohmann::json());
      std::string error =
          last.is_object() ? cell(last.value("api", nlohmann::json())) + ":" + cell(last.value("error", nlohmann::json())) : "-";
      if (last.is_object() && last.contains("injected_by") && last["injected_by"].is_string())
        error += " (rule " + last["injected_by"].get<std::string>() + ")";
      rows.push_back({cell(t.value("transactional_id", nlohmann::json())), cell(t.value("producer_id", nlohmann::json())),
                      cell(t.value("producer_epoch", nlohmann::json())), cell(t.value("outcome", nlohmann::json())),
                      seconds(t.value("started_seconds_ago", nlohmann::json())), partitions.empty() ? "-" : partitions,
                      cell(t.value("records", nlohmann::json(0))), cell(t.value("retries", nlohmann::json(0))),
                      cell(t.value("client_id", nlohmann::json())), error});
    }
  }
  if (rows.size() == 1) return "no transactions\n";
  return text_table(rows);
}

namespace {
/// "API:ERROR (rule NAME)" of one TransactionError object; "-" for null.
std::string error_cell(const nlohmann::json& e) {
  if (!e.is_object()) return "-";
  std::string out = cell(e.value("api", nlohmann::json())) + ":" + cell(e.value("error", nlohmann::json()));
  if (e.contains("injected_by") && e["injected_by"].is_string()) out += " (rule " + e["injected_by"].get<std::string>() + ")";
  return out;
}

std::string number_cell(const nlohmann::json& v, const char* format) {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v.is_number() ? v.get<double>() : 0.0);
  return buf;
}

/// What the client was told of an EndTxn the coordinator completed (docs/transactions.md "What
/// kproxy counts under faults"): "" when its answer reached the client at once.
std::string end_answer_note(const nlohmann::json& t) {
  const bool acknowledged = !t.contains("end_acknowledged") || t["end_acknowledged"] != false;
  const auto retries = t.value("end_retries", nlohmann::json(0));
  const bool retried = retries.is_number() && retries.get<int64_t>() > 0;
  if (!acknowledged)
    return retried ? "EndTxn answer lost; sent again " + cell(retries) + "x, not told yet" : "EndTxn answer lost; not told yet";
  if (retried) return "EndTxn answer lost; sent again " + cell(retries) + "x";
  return "";
}

/// Why an ended transaction ended as it did: its cause, else what the outcome implies; and an
/// EndTxn answer the client did not get at once.
std::string cause_cell(const nlohmann::json& t) {
  std::string note = end_answer_note(t);
  nlohmann::json cause = t.value("cause", nlohmann::json());
  if (cause.is_object()) return error_cell(cause) + (note.empty() ? "" : "; " + note);
  std::string outcome = t.value("outcome", std::string());
  if (!note.empty()) return outcome == "aborted" ? "the client aborted; " + note : note;
  if (outcome == "aborted") return "the client aborted";
  if (outcome == "fenced") {
    nlohmann::json by = t.value("fenced_by", nlohmann::json());
    if (by.is_object())
      return "a new producer (id " + cell(by.value("producer_id", nlohmann::json())) + ", epoch " +
             cell(by.value("producer_epoch", nlohmann::json())) + ")";
    return "fenced";
  }
  if (outcome == "timed_out") return "open past transaction.timeout.ms";
  if (outcome == "unknown") return "the client went silent";
  return "-";
}
}  // namespace

std::string transaction_overview(const nlohmann::json& body) {
  std::string out;
  nlohmann::json open = body.is_object() ? body.value("transactions", nlohmann::json::array()) : nlohmann::json::array();
  if (!open.is_array() || open.empty()) {
    out += "Open transactions: none\n";
  } else {
    out += "Open transactions (" + std::to_string(open.size()) + "), oldest first:\n" + transaction_table(open);
  }
  nlohmann::json ended = body.is_object() ? body.value("ended", nlohmann::json::array()) : nlohmann::json::array();
  out += "\n";
  if (!ended.is_array() || ended.empty()) {
    out += "Ended transactions: none yet\n";
  } else {
    out += "Ended transactions, newest first (the last " + std::to_string(ended.size()) + "):\n";
    std::vector<std::vector<std::string>> rows{
        {"TRANSACTIONAL_ID", "PRODUCER", "EPOCH", "OUTCOME", "ENDED_S_AGO", "DURATION_S", "RECORDS", "RETRIES", "CAUSE", "ERRORS"}};
    for (const auto& t : ended) {
      if (!t.is_object()) continue;
      double started = t.value("started_seconds_ago", 0.0), duration = t.value("duration_seconds", 0.0);
      std::string errors;
      for (const auto& e : t.value("errors", nlohmann::json::array())) errors += (errors.empty() ? "" : ", ") + error_cell(e);
      if (t.value("errors_dropped", 0) > 0) errors += " +" + std::to_string(t.value("errors_dropped", 0)) + " more";
      rows.push_back({cell(t.value("transactional_id", nlohmann::json())), cell(t.value("producer_id", nlohmann::json())),
                      cell(t.value("producer_epoch", nlohmann::json())), cell(t.value("outcome", nlohmann::json())),
                      number_cell(std::max(0.0, started - duration), "%.1f"), number_cell(duration, "%.3f"),
                      cell(t.value("records", nlohmann::json(0))), cell(t.value("retries", nlohmann::json(0))), cause_cell(t),
                      errors.empty() ? "-" : errors});
    }
    out += text_table(rows);
  }
  nlohmann::json outcomes = body.is_object() ? body.value("outcomes", nlohmann::json()) : nlohmann::json();
  if (outcomes.is_object()) {
    std::string line;
    for (const char* k : {"committed", "aborted", "fenced", "timed_out", "unknown"})
      line += (line.empty() ? "" : ", ") + cell(outcomes.value(k, nlohmann::json(0))) + " " + k;
    out += "\nSince start: " + line + "; " + cell(outcomes.value("open", nlohmann::json(0))) + " open\n";
  }
  return out;
}

bool parse_ctl_args(const std::vector<std::string>& args, CtlCall& call, std::string& error) {
  if (const char* t = std::getenv("KPROXY_ADMIN_TOKEN")) call.token = t;
  if (const char* a = std::getenv("KPROXY_ADMIN"); a && *a) call.admin = a;
  std::vector<std::string> words;
  std::string transactions_option;  ///< --open or --last, given: only `transactions [list]` takes them
  bool last_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      call.help = true;
      return true;
    }
    if (a == "--admin" || a == "--token") {
      if (i + 1 >= args.size()) {
        error = a + " needs a value";
        return false;
      }
      (a == "--admin" ? call.admin : call.token) = args[++i];
    } else if (a == "--json") {
      call.json = true;
    } else if (a == "--open") {
      call.open_only = true;
      transactions_option = a;
    } else if (a == "--last" || a.rfind("--last=", 0) == 0) {
      std::string value;
      if (a == "--last") {
        if (i + 1 >= args.size()) {
          error = "--last needs a value";
          return false;
        }
        value = args[++i];
      } else {
        value = a.substr(7);
      }
      char* end = nullptr;
      errno = 0;
      unsigned long long n =
          value.empty() || !std::isdigit(static_cast<unsigned char>(value[0])) ? 0 : std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || !std::isdigit(static_cast<unsigned char>(value[0])) || errno != 0 || *end != '\0' ||
          n > CtlCall::kMaxEndedShown) {
        error = "--last: expected a whole number from 0 to " + std::to_string(CtlCall::kMaxEndedShown) + ", got '" + value + "'";
        return false;
      }
      call.last = static_cast<size_t>(n);
      last_given = true;
      transactions_option = "--last";
    } else if (a.rfind("--admin=", 0) == 0) {
      call.admin = a.substr(8);
    } else if (a.rfind("--token=", 0) == 0) {
      call.token = a.substr(8);
    } else if (a.size() > 1 && a[0] == '-' && words.size() < 2) {
      error = "unknown option " + a;
      return false;
    } else {
      words.push_back(a);
    }
  }
  auto want = [&](size_t n, const char* shape) {
    if (words.size() == n) return true;
    error = std::string("expected: kproxy ctl ") + shape;
    return false;
  };
  if (words.empty()) {
    error = "no command given";
    return false;
  }
  const std::string& what = words[0];
  std::string verb = words.size() > 1 ? words[1] : "";
  if (!transactions_option.empty() && !(what == "transactions" && (verb.empty() || verb == "list"))) {
    error = transactions_option + " applies to `transactions [list]` only";
    return false;
  }
  if (what == "reload") {
    if (!want(1, "reload")) return false;
    call.method = "POST";
    call.path = "/reload";
    return true;
  }
  if (what == "transactions") {
    if (verb.empty() || verb == "list") {
      if (words.size() > 2) return want(2, "transactions list");
      if (call.open_only && last_given) {
        error = "--open lists the open transactions only: it takes no --last";
        return false;
      }
      call.method = "GET";
      call.path = call.open_only ? "/transactions" : "/transactions?ended=" + std::to_string(call.last);
    } else if (verb == "show") {
      if (!want(3, "transactions show TRANSACTIONAL_ID")) return false;
      call.method = "GET";
      call.path = "/transactions/" + percent_encode(words[2]);
    } else {
      error = "unknown transactions command '" + verb + "' (list, show)";
      return false;
    }
    return true;
  }
  if (what == "faults") {
    if (verb == "list") {
      if (!want(2, "faults list")) return false;
      call.method = "GET";
      call.path = "/faults";
    } else if (verb == "reset") {
      if (!want(2, "faults reset")) return false;
      call.method = "POST";
      call.path = "/faults/reset";
    } else if (verb == "get" || verb == "delete") {
      if (!want(3, verb == "get" ? "faults get NAME" : "faults delete NAME") || !valid_name(words[2], error)) return false;
      call.method = verb == "get" ? "GET" : "DELETE";
      call.path = "/faults/" + words[2];
    } else if (verb == "put") {
      if (!want(4, "faults put NAME RULE (RULE: JSON, @FILE or -)") || !valid_name(words[2], error)) return false;
      call.method = "PUT";
      call.path = "/faults/" + words[2];
      if (!read_body(words[3], call.body, error)) return false;
    } else {
      error = "unknown faults command '" + verb + "' (list, get, put, delete, reset)";
      return false;
    }
    return true;
  }
  if (what == "api-versions") {
    if (verb == "get") {
      if (!want(2, "api-versions get")) return false;
      call.method = "GET";
      call.path = "/api-versions";
    } else if (verb == "put") {
      if (!want(3, "api-versions put LIST (LIST: JSON, @FILE or -)")) return false;
      call.method = "PUT";
      call.path = "/api-versions";
      if (!read_body(words[2], call.body, error)) return false;
    } else {
      error = "unknown api-versions command '" + verb + "' (get, put)";
      return false;
    }
    return true;
  }
  if (what == "scenario") {
    if (verb == "apply") {
      if (!want(3, "scenario apply FILE")) return false;
      call.method = "PUT";
      call.path = "/scenario";
      const std::string& file = words[2];
      if (!read_body(file == "-" || (!file.empty() && file[0] == '@') ? file : "@" + file, call.body, error)) return false;
    } else if (verb == "show") {
      if (!want(2, "scenario show")) return false;
      call.method = "GET";
      call.path = "/scenario";
    } else if (verb == "clear") {
      if (!want(2, "scenario clear")) return false;
      call.method = "DELETE";
      call.path = "/scenario";
    } else {
      error = "unknown scenario command '" + verb + "' (apply, show, clear)";
      return false;
    }
    return true;
  }
  error = "unknown command '" + what + "' (faults, api-versions, scenario, reload)";
  return false;
}

int run_ctl_command(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  CtlCall call;
  std::string error;
  if (!parse_ctl_args(args, call, error)) {
    std::fprintf(stderr, "kproxy ctl: %s\n%s", error.c_str(), ctl_usage());
    return 2;
  }
  if (call.help) {
    std::fputs(ctl_usage(), stdout);
    return 0;
  }
  HttpResult r = http_call(call);
  if (!r.error.empty()) {
    std::fprintf(stderr, "kproxy ctl: %s\n", r.error.c_str());
    return 1;
  }
  auto parsed = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (r.status < 200 || r.status >= 300) {
    std::string why = r.body;
    if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()) why = parsed["error"].get<std::string>();
    if (r.status == 401) why += " (give the admin token with --token or $KPROXY_ADMIN_TOKEN)";
    std::fprintf(stderr, "kproxy ctl: %s %s: HTTP %d: %s\n", call.method.c_str(), call.path.c_str(), r.status, why.c_str());
    return 1;
  }
  if (r.status == 204 || r.body.empty()) {
    std::printf("ok\n");
  } else if (!call.json && call.method == "GET" && call.path == "/faults" && parsed.is_object() && parsed.contains("faults")) {
    std::fputs(fault_table(parsed["faults"]).c_str(), stdout);
  } else if (!call.json && call.method == "GET" && call.path.rfind("/transactions?", 0) == 0 && parsed.is_object()) {
    std::fputs(transaction_overview(parsed).c_str(), stdout);
  } else if (!call.json && call.method == "GET" && call.path.rfind("/transactions", 0) == 0 && parsed.is_object() &&
             parsed.contains("transactions")) {
    std::fputs(transaction_table(parsed["transactions"]).c_str(), stdout);
  } else if (!parsed.is_discarded()) {
    std::printf("%s\n", parsed.dump(2).c_str());
  } else {
    std::printf("%s\n", r.body.c_str());
  }
  return 0;
}

}  // namespace kproxy::cli
