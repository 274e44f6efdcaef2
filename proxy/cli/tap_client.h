// `kproxy tap`: follows GET /tap on a running kproxy's admin listener and prints it readably.
//
//   kproxy tap [--admin HOST:PORT] [--token TOKEN | --token-file PATH] [--json] [--api NAME] [--client-id ID]
//              [--connection N] [--direction request|response] [--errors]
//
// Default admin address 127.0.0.1:9644; the token defaults to $KPROXY_ADMIN_TOKEN
// (--token-file reads it from the file the proxy's admin.token_file names). One line per
// frame: time, connection, client id, arrow (→ request, ← response), API and version,
// correlation id, latency, then the body as compact JSON. --json prints the raw JSON lines.
#pragma once

namespace kproxy::cli {

/// Runs the command with the arguments after "tap"; returns the process exit status.
int run_tap_command(int argc, char** argv);

}  // namespace kproxy::cli
