// report_bound: one line on standard output for every socket kproxy listens on, so that a test
// harness or a script that configured port 0 learns the port the kernel picked (issue #30 item
// 7; GET /listeners says the same). Logs go to standard error; standard output carries only these
// lines, each flushed as it is written:
//
//   kproxy bound listener kafka 127.0.0.1:41234          a listener's bootstrap port
//   kproxy bound broker kafka/node-1 127.0.0.1:41235     the port standing for one broker
//   kproxy bound admin api 127.0.0.1:41236               the admin API
//
// Under `log: { format: json }` each line is a JSON object instead, so that a log pipeline that
// reads standard output and standard error together still sees one object per line:
//
//   {"kproxy":"bound","kind":"listener","label":"kafka","address":"127.0.0.1:41234"}
#pragma once

#include <string>
#include <string_view>

namespace kproxy::util {

/// "kproxy bound KIND LABEL ADDRESS", or the JSON object when `json` (the formats above),
/// without the newline.
std::string bound_line(std::string_view kind, std::string_view label, std::string_view address, bool json = false);

/// Whether report_bound writes JSON objects (follows log.format; configure_logging sets it).
void set_bound_report_json(bool json);

/// Writes bound_line(...) and a newline to standard output and flushes it. Thread-safe.
void report_bound(std::string_view kind, std::string_view label, std::string_view address);

}  // namespace kproxy::util
