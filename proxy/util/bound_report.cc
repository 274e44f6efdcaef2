#include "proxy/util/bound_report.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "proxy/util/logging.h"

namespace kproxy::util {

namespace {
std::atomic<bool> report_json{false};
}  // namespace

void set_bound_report_json(bool json) { report_json.store(json); }

std::string bound_line(std::string_view kind, std::string_view label, std::string_view address, bool json) {
  if (json) {
    return "{\"kproxy\":\"bound\",\"kind\":\"" + json_escape(kind) + "\",\"label\":\"" + json_escape(label) + "\",\"address\":\"" +
           json_escape(address) + "\"}";
  }
  std::string line = "kproxy bound ";
  line.append(kind).append(" ").append(label).append(" ").append(address);
  return line;
}

void report_bound(std::string_view kind, std::string_view label, std::string_view address) {
  static std::mutex mutex;
  std::string line = bound_line(kind, label, address, report_json.load()) + "\n";
  std::lock_guard lock(mutex);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace kproxy::util
