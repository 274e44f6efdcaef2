// `kproxy ctl`: the chaos admin API (proxy/chaos/admin_routes.h) from the command line.
//
//   kproxy ctl [--admin HOST:PORT] [--token TOKEN] COMMAND
//     faults list                         GET    /faults           a table (--json: the JSON)
//     faults get NAME                     GET    /faults/NAME
//     faults put NAME RULE                PUT    /faults/NAME      RULE: JSON text, @FILE or - (stdin)
//     faults delete NAME                  DELETE /faults/NAME
//     faults reset                        POST   /faults/reset
//     api-versions get                    GET    /api-versions
//     api-versions put LIST               PUT    /api-versions     LIST: JSON text, @FILE or -
//                                         (API and feature entries: docs/api-versions-policy.md)
//     scenario apply FILE                 PUT    /scenario         FILE: a scenario (scenarios/*.yaml), @FILE or -
//     scenario show                       GET    /scenario
//     scenario clear                      DELETE /scenario
//     reload                              POST   /reload
//     transactions [list] [--last N]      GET    /transactions?ended=N   the open transactions, then
//                                         the N (default 20) most recent ended ones, newest first, with
//                                         outcome, cause and the rules that injected errors, then the
//                                         counts by outcome since start (--json: the JSON)
//     transactions --open                 GET    /transactions     only the open ones, as a table
//     transactions show ID                GET    /transactions/ID  a table of its recent transactions
//
// The admin address defaults to $KPROXY_ADMIN, then 127.0.0.1:9644; the token to $KPROXY_ADMIN_TOKEN. The answer's
// JSON is printed indented on stdout. Exit status: 0 on success, 1 when kproxy refused the call
// (its error message on stderr, e.g. "HTTP 400: match.api: unknown API 'EndTxnn'") or cannot be
// reached, 2 for a usage error.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kproxy::cli {

/// One admin API call, as `kproxy ctl` arguments describe it.
struct CtlCall {
  std::string admin = "127.0.0.1:9644";
  std::string token;
  std::string method;                ///< GET, PUT, DELETE, POST
  std::string path;                  ///< e.g. /faults/slow
  std::string body;                  ///< PUT bodies (the JSON as given; kproxy validates it)
  bool help = false;                 ///< --help: print the usage and exit 0
  bool json = false;                 ///< --json: print the admin API's JSON as it is (`faults list` prints a table without it)
  bool open_only = false;            ///< transactions --open: the open transactions only
  size_t last = kDefaultEndedShown;  ///< transactions --last N: how many ended transactions to list

  static constexpr size_t kDefaultEndedShown = 20;
  static constexpr size_t kMaxEndedShown = 1000;  ///< the admin API's bound (GET /transactions?ended=N)
};

/// Parses the arguments after "ctl". On a usage error returns false with `error` set. Reads
/// @FILE and - (stdin) bodies; `token` starts from $KPROXY_ADMIN_TOKEN, `admin` from $KPROXY_ADMIN
/// (when set and not empty).
bool parse_ctl_args(const std::vector<std::string>& args, CtlCall& call, std::string& error);

/// The rules of GET /faults ({"faults": [...]}'s array) as an aligned text table: name, API (and
/// the other match keys), action, trigger, hits, injected.
std::string fault_table(const nlohmann::json& rules);
/// Transactions (GET /transactions, /transactions/ID) as a table: id, producer, epoch, outcome,
/// age, partitions, records, retries, client, last error (and the rule that injected it).
std::string transaction_table(const nlohmann::json& transactions);
/// What `kproxy transactions` prints for GET /transactions?ended=N: the open transactions (a
/// transaction_table), the recent ended ones newest first (outcome, when it ended, how long it
/// took, records, retries, cause, and every error with the rule that injected it) and a line of
/// the counts by outcome since start.
std::string transaction_overview(const nlohmann::json& body);
/// Rows of cells as left-aligned columns, two spaces apart, one line per row.
std::string text_table(const std::vector<std::vector<std::string>>& rows);
/// The usage text.
const char* ctl_usage();

/// Runs the command with the arguments after "ctl"; returns the process exit status.
int run_ctl_command(int argc, char** argv);

}  // namespace kproxy::cli
