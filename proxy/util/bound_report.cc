#include "proxy/util/bound_report.h"

#include <cstdio>
#include <mutex>

namespace kproxy::proxy {

std::string bound_line(std::string_view kind, std::string_view label, std::string_view address) {
  std::string line = "kproxy bound ";
  line.append(kind).append(" ").append(label).append(" ").append(address);
  return line;
}

void report_bound(std::string_view kind, std::string_view label, std::string_view address) {
  static std::mutex mutex;
  std::string line = bound_line(kind, label, address) + "\n";
  std::lock_guard lock(mutex);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace kproxy::proxy
