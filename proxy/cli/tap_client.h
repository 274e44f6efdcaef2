// `kproxy tap`: follows GET /tap on a running kproxy's admin listener and prints it readably.
//
//   kproxy tap [--admin HOST:PORT] [--token TOKEN | --token-file PATH] [--json] [--api NAME] [--client-id ID]
//              [--connection N] [--direction request|response] [--errors] [--transactions]
//
// Default admin address $KPROXY_ADMIN, else 127.0.0.1:9644; the token defaults to $KPROXY_ADMIN_TOKEN
// (--token-file reads it from the file the proxy's admin.token_file names). One line per
// frame: time, connection, client id, arrow (→ request, ← response), API and version,
// correlation id, latency, then the body as compact JSON. --json prints the raw JSON lines.
// --transactions follows the transactions instead (docs/transactions.md): one line per step,
// "01:02:03.000004 txn orders pid=7 epoch=0 end aborted after 12.5 ms, 10 records, cause
// Produce:TRANSACTION_ABORTABLE (rule abortable)".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kproxy::cli {

/// One transaction event of the tap (a JSON line with "transaction") as the readable line above;
/// `time` is its time of day.
std::string transaction_event_text(const std::string& time, const nlohmann::json& event);

/// Runs the command with the arguments after "tap"; returns the process exit status.
int run_tap_command(int argc, char** argv);

}  // namespace kproxy::cli
